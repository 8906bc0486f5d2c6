"""A graph model's batch run straight from the exec message's request items.

The worker hosts a graph model (onnxruntime, openvino) like any ``TritonPythonModel``:
pb_utils requests are built over the input arena, ``execute`` returns pb_utils responses,
and those are checked and placed for the output arena. For the usual batch — requests
alike in their fixed-size inputs and the outputs they ask for — :func:`run_items` skips
those objects: each input of the batch is read from the arena as one array (a view when
the requests' copies lie back to back, as a lone input of an aligned size does; else the
requests' views joined), reshaped as the general path reshapes, and the outputs are placed
exactly as
:func:`~tritium.backends.python.batch_outputs.collect` places a Python model's. Any other
batch (BYTES tensors, requests that differ) takes the general path.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from tritium.backends.python.output_checks import OutputChecks
from tritium.backends.python.pb_utils_errors import error_pair
from tritium.core.datatypes import RAW_DTYPES
from tritium.ipc import Arena
from tritium.ipc.arena import ALIGN_MASK
from tritium.ipc.messages import ReplyItem, RequestItem

if TYPE_CHECKING:
    from tritium.backends.graph_model import GraphModel

#: What :func:`run_items` returns: the replies, the placed outputs and the arena end, as
#: ``collect`` returns them.
Collected = tuple[list[ReplyItem], list[Any], int]


def batch_feeds(
    model: GraphModel, items: list[RequestItem | int], arena: Arena
) -> tuple[dict[str, Any], list[str], int] | None:
    """The feeds of one run over the whole batch, the outputs it asks for and the rows
    per request; None when the batch takes the general path."""
    first = items[0]
    if not isinstance(first, RequestItem) or not first.inputs:
        return None
    n = len(items)
    if n > 1:
        if not model.batching:
            return None
        inputs, outputs = first.inputs, first.outputs
        for item in items:
            if item != 0 and (item.inputs != inputs or item.outputs != outputs):  # type: ignore[union-attr]
                return None
    wanted = first.outputs
    names = model.outputs if wanted is None else [o for o in model.outputs if o in wanted]
    wire = model.wire
    for name in names:
        if wire[name] == "BYTES":
            return None
    buf = arena.buf
    assert buf is not None
    # Laid out as build_requests reads them: the batch's cancellation flags, then each
    # request's inputs back to back, every tensor aligned.
    start = (n + ALIGN_MASK) & ~ALIGN_MASK
    stride = 0
    for _, _, _, nbytes in first.inputs:
        stride += (nbytes + ALIGN_MASK) & ~ALIGN_MASK
    feeds = {}
    rows = 0
    offset = start
    for name, tensor_wire, shape, nbytes in first.inputs:
        dtype = RAW_DTYPES.get(tensor_wire)
        if dtype is None:
            return None
        shape = tuple(shape)
        if n == 1:
            array = np.ndarray(shape, dtype, buf, offset)
        elif nbytes == stride:
            # One input of an aligned size: the batch's copies are one block.
            array = np.ndarray((n * shape[0], *shape[1:]), dtype, buf, offset)
        else:
            array = np.concatenate(
                [np.ndarray(shape, dtype, buf, offset + i * stride) for i in range(n)]
            )
        if model.batching:
            rows = shape[0]
        feeds[name] = model._model_shape(name, array)
        offset += (nbytes + ALIGN_MASK) & ~ALIGN_MASK
    return feeds, names, rows


def run_items(
    model: GraphModel,
    feeds: dict[str, Any],
    names: list[str],
    rows: int,
    n: int,
    checks: OutputChecks,
) -> Collected:
    """Run the batch's ``feeds`` (from :func:`batch_feeds`) for ``n`` requests of
    ``rows`` rows each; its outputs split per request and placed as ``collect`` does."""
    try:
        results = model._run(feeds, names)
    except Exception as exc:  # noqa: BLE001 - the runtime's own exception types
        error = ReplyItem(error=error_pair(model._run_error(exc)))
        return [error] * n, [], 0
    wire = model.wire
    batching = model.batching
    columns = []
    for name, array in zip(names, results):
        array = np.ascontiguousarray(model._config_shape(name, array))
        item_shape = (rows, *array.shape[1:]) if batching else array.shape
        checks.check(name, wire[name], item_shape)
        columns.append((name, wire[name], item_shape, array))
    placed = []
    pos = 0
    for index in range(n):
        part = slice(index * rows, index * rows + rows)
        for name, tensor_wire, item_shape, array in columns:
            piece = array[part] if batching else array
            placed.append((pos, index, name, tensor_wire, item_shape, piece, None))
            pos = (pos + piece.nbytes + ALIGN_MASK) & ~ALIGN_MASK
    return [ReplyItem([], None, None) for _ in range(n)], placed, pos
