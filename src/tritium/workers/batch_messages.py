"""The two messages of one batch between the server and a worker, without I/O.

``write_batch`` writes the batch's inputs into the input arena and builds the exec message;
``read_responses`` turns the worker's reply and the output arena into responses. Tensors
lie back to back at ``ALIGN`` boundaries (inputs after one cancellation-flag byte per
request, outputs from the start of the output arena), so descriptors carry sizes and both
sides count offsets. An item that would repeat the one before it travels as ``0``: requests
of one layout (same ``layout_key`` and sizes), and replies the worker finds equal.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import msgspec
import numpy as np

from tritium.core import InferRequest, InferResponse, OutputTensor
from tritium.core.datatypes import RAW_DTYPES
from tritium.core.errors import InternalError, error_from_code
from tritium.ipc import Arena, encode
from tritium.ipc import tensors as ipc_tensors
from tritium.ipc.arena import ALIGN_MASK
from tritium.ipc.messages import Exec, RequestItem, Result

#: (exec messages without and with the poll hint, input offsets, input sizes, arena end) of
#: a one-request batch of fixed-size inputs.
Layout = tuple[tuple[bytes, bytes], list[int], list[int], int]


def write_batch(
    batch: list[InferRequest],
    arena_for: Callable[[int], Arena],
    slots: list[int] | None = None,
    poll: bool = False,
    refs: list[list[int] | int] | None = None,
    keep: int = 0,
    sliced: ipc_tensors.SlicedWrites | None = None,
) -> tuple[bytes, Layout | None]:
    """Write the inputs (into ``arena_for(bytes needed)``) and return the exec message,
    with the layout of a single request with fixed-size inputs (for reuse), else None.
    ``slots`` name the requests of a decoupled model (never reused). ``poll`` tells the
    worker to poll for its next batch after this one (see ``WorkerProcess.submit``).
    ``refs`` (one per input of the batch, in order: ``[arena id, offset]`` or ``0``) say
    which inputs the worker reads in place from a shared arena: those take no room here
    and are described with 0 bytes (never reused). ``keep`` names the shared arena lent
    for the outputs (see ``WorkerProcess._write_steps``). Inputs of ``SLICED_WRITE_BYTES``
    or more go to ``sliced``, when given, to be written by the caller before it sends the
    message."""
    n = len(batch)
    sizes = []
    raws = []
    fixed = True
    encoded_size = ipc_tensors.encoded_size
    for request in batch:
        for tensor in request.inputs:
            size, raw = encoded_size(tensor.datatype, tensor.data)
            sizes.append(size)
            raws.append(raw)
            if raw is not None:
                fixed = False
    if refs is not None:
        fixed = False
        for k, ref in enumerate(refs):
            if ref:
                # Nothing to write: an empty "serialized" form is written as no bytes.
                sizes[k] = 0
                raws[k] = b""
    # Cancellation flags: one byte per request at the start of the arena.
    offsets, end = ipc_tensors.layout(sizes, start=n)
    buf = arena_for(end).buf
    assert buf is not None
    buf[0:n] = bytes(n)
    write = ipc_tensors.write
    big = ipc_tensors.SLICED_WRITE_BYTES
    items: list[RequestItem | int] = []
    k = 0
    last_key = None
    last_sizes: list[int] = []
    for request in batch:
        start = k
        for tensor in request.inputs:
            if sliced is not None and sizes[k] >= big:
                sliced.add(offsets[k], tensor.data, raws[k])
            else:
                write(buf, offsets[k], tensor.data, raws[k])
            k += 1
        key = request.layout_key
        these = sizes[start:k]
        if key is not None and key == last_key and these == last_sizes:
            items.append(0)
            continue
        last_key = key
        last_sizes = these
        outputs = None if request.outputs is None else [o.name for o in request.outputs]
        items.append(
            RequestItem(
                request.id,
                request.correlation_id,
                request.flags,
                request.parameters,
                outputs,
                [(t.name, t.datatype, t.shape, size) for t, size in zip(request.inputs, these)],
            )
        )
    message = Exec(items, slots, refs, keep, poll)
    frame = encode(message)
    if slots is not None or keep or not (n == 1 and fixed and batch[0].layout_key is not None):
        return frame, None
    other_frame = encode(msgspec.structs.replace(message, poll=not poll))
    frames = (other_frame, frame) if poll else (frame, other_frame)
    return frame, (frames, offsets, sizes, end)


def read_responses(
    batch: list[InferRequest], reply: Result, out_buf: Any, label: str, kept: Any = None
) -> list[InferResponse]:
    """One response per request from the reply's items (``0``: the item before again).

    The reply's ``end`` bytes of ``out_buf`` are copied out in one piece, so the arena can
    take the next batch at once; every output is a (writable) view of that copy. With
    ``kept`` (a shared arena's block, where the worker wrote this batch's outputs, or a
    copy of the output arena the caller already made) they are views of ``kept``
    instead: nothing is copied here."""
    items = reply.responses
    if len(items) != len(batch):
        raise InternalError(f"instance '{label}' returned a malformed reply")
    end = reply.end
    block: Any = b""
    if kept is not None:
        block = kept
    elif end:
        block = bytearray(memoryview(out_buf)[:end])
    responses: list[InferResponse] = []
    dtypes = RAW_DTYPES
    pos = 0
    item: Any = None
    for request, entry in zip(batch, items):
        if entry != 0:
            item = entry
        response = InferResponse(request.model_name, request.model_version, request.id)
        outputs = item.outputs
        if outputs is None:
            err = item.error
            if err is None:
                raise InternalError(f"instance '{label}' returned a malformed reply")
            response.error = error_from_code(err[0], err[1])
        else:
            tensors = response.outputs
            for name, datatype, shape, nbytes in outputs:
                off = pos
                pos = (off + nbytes + ALIGN_MASK) & ~ALIGN_MASK
                if off + nbytes > end:
                    raise InternalError(f"instance '{label}' returned a malformed reply")
                dtype = dtypes.get(datatype)
                if dtype is None:  # BYTES
                    data = ipc_tensors.copy_out(block, datatype, shape, off, nbytes)
                elif nbytes:
                    data = np.ndarray(shape, dtype, block, off)
                else:
                    data = np.empty(shape, dtype)
                tensors.append(OutputTensor(name, datatype, data.shape, data))
            params = item.params
            if params:
                response.parameters = params
        responses.append(response)
    return responses
