"""The requests of one batch as model code gets them: pb_utils requests over the arena.

Runs for every batch in the worker: fixed-size inputs are numpy views of the input arena
(no copy), BYTES inputs are decoded, and inputs another ensemble step left in a shared
arena are views of that arena.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np

from tritium.backends.python import pb_utils
from tritium.core.datatypes import RAW_DTYPES
from tritium.ipc import Arena
from tritium.ipc import tensors as ipc_tensors
from tritium.ipc.arena import ALIGN_MASK
from tritium.ipc.messages import RequestItem

_new_tensor = object.__new__
#: Inputs read in place: one ``[arena id, offset]`` or ``0`` per input, and the shared
#: arenas by id.
Refs = tuple[list[Any], dict[int, Arena]]


def build_requests(
    items: list[RequestItem | int],
    arena: Arena,
    model_name: str,
    version: str,
    all_outputs: list[str],
    refs: Refs | None = None,
) -> list[Any]:
    """pb_utils requests over the arena: one per item (``0``: the item before again),
    inputs back to back after the batch's cancellation flags. With ``refs`` (one per
    input: ``[arena id, offset]`` or ``0``, and the shared arenas by id) an input with a
    reference is a view of that shared arena instead (and takes no room here)."""
    buf = arena.buf
    assert buf is not None
    next_ref = None
    if refs is not None:
        next_ref = iter(refs[0]).__next__
        shared = refs[1]
    requests = []
    make_tensor = _new_tensor
    tensor_class = pb_utils.Tensor
    dtypes = RAW_DTYPES
    received = pb_utils.InferenceRequest._received
    pos = (len(items) + ALIGN_MASK) & ~ALIGN_MASK
    item: Any = None
    for index, entry in enumerate(items):
        if entry != 0:
            item = entry
        inputs = []
        for name, wire, shape, nbytes in item.inputs:
            off = pos
            pos = (off + nbytes + ALIGN_MASK) & ~ALIGN_MASK
            dtype = dtypes.get(wire)
            if next_ref is not None:
                ref = next_ref()
                if ref:
                    # Another step's output, read where its worker wrote it.
                    tensor = make_tensor(tensor_class)
                    tensor._name = name
                    tensor._array = np.ndarray(shape, dtype, shared[ref[0]].buf, ref[1])
                    tensor._datatype = wire
                    inputs.append(tensor)
                    continue
            if dtype is None:  # BYTES: decoded into an object array
                inputs.append(
                    tensor_class._from_buffer(
                        name, ipc_tensors.view(buf, wire, shape, off, nbytes), wire
                    )
                )
                continue
            # Fixed-size: a numpy view over the arena, no copy.
            tensor = make_tensor(tensor_class)
            tensor._name = name
            tensor._array = np.ndarray(shape, dtype, buf, off)
            tensor._datatype = wire
            inputs.append(tensor)
        outputs = item.outputs
        params = item.params
        requests.append(
            received(
                inputs,
                set(all_outputs if outputs is None else outputs),
                model_name,
                version,
                item.id,
                item.corr,
                item.flags,
                0,
                json.dumps(params, separators=(",", ":")) if params else "{}",
                lambda i=index: buf[i] != 0,  # type: ignore[misc]
            )
        )
    return requests
