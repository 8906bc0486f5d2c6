"""Writes one batch for a worker: its inputs into the input arena, and its exec frame.

A single request whose layout was seen before (same ``layout_key`` and input sizes)
reuses that layout's frame as is and has its inputs written where they went last time;
anything else goes through ``batch_messages.write_batch``. Inputs of
``SLICED_WRITE_BYTES`` or more are left in :attr:`BatchWriter.sliced`, for the caller to
write a slice per loop iteration before it sends the frame.
"""

from __future__ import annotations

from tritium.core import InferRequest
from tritium.ipc import tensors as ipc_tensors
from tritium.workers.batch_messages import Layout, write_batch
from tritium.workers.worker_arenas import WorkerArenas

_LAYOUT_CACHE = 256


class BatchWriter:
    def __init__(self) -> None:
        # layout_key -> (exec frames without and with the poll hint, input offsets,
        # input sizes, arena end) of a single request with fixed-size inputs.
        self.layouts: dict[object, Layout] = {}
        # Big inputs of the batch being started, written a slice per loop iteration.
        self.sliced = ipc_tensors.SlicedWrites()

    def write(self, batch: list[InferRequest], poll: bool, arenas: WorkerArenas) -> bytes:
        """The exec frame of an ordinary batch (inputs written or left in ``sliced``)."""
        frame = self._write_cached(batch[0], poll, arenas) if len(batch) == 1 else None
        if frame is not None:
            return frame
        frame, layout = write_batch(batch, arenas.for_inputs, None, poll, sliced=self.sliced)
        key = batch[0].layout_key
        if layout is not None and key is not None:
            if len(self.layouts) >= _LAYOUT_CACHE:
                self.layouts.clear()
            self.layouts[key] = layout
        return frame

    def write_decoupled(
        self, batch: list[InferRequest], slots: list[int], poll: bool, arenas: WorkerArenas
    ) -> bytes:
        """The exec frame of a decoupled model's batch (its requests hold ``slots``)."""
        frame, _ = write_batch(batch, arenas.for_inputs, slots, poll, sliced=self.sliced)
        return frame

    def _write_cached(
        self, request: InferRequest, poll: bool, arenas: WorkerArenas
    ) -> bytes | None:
        """For a request whose layout was seen before (same ``layout_key``: names, types,
        shapes, outputs, id, parameters), write its inputs where they went last time and
        reuse that exec frame as is; None when there is nothing to reuse."""
        key = request.layout_key
        if key is None:
            return None
        cached = self.layouts.get(key)
        if cached is None:
            return None
        frames, offsets, sizes, end = cached
        arena = arenas.inputs
        inputs = request.inputs
        if end > arena.size or len(inputs) != len(sizes):
            return None
        for tensor, size in zip(inputs, sizes):
            if tensor.data.nbytes != size:
                return None
        buf = arena.buf
        assert buf is not None
        buf[0] = 0
        write = ipc_tensors.write
        big = ipc_tensors.SLICED_WRITE_BYTES
        for tensor, off, size in zip(inputs, offsets, sizes):
            if size >= big:
                self.sliced.add(off, tensor.data, None)
            else:
                write(buf, off, tensor.data, None)
        return frames[poll]
