"""Decoupled requests of one worker, as seen from the server.

Every request of a decoupled model holds a slot from the moment its batch is sent until
its final response: the slot names the request in the worker's ``resp`` messages, and
byte ``slot`` of a small shared flags arena is its cancellation flag, which the model
reads through ``is_cancelled()`` at any time (the input arena's flags only live as long
as the batch). Responses arrive in the worker's ring (see
``backends/python/response_sender``): each is copied out when its message arrives, and
the ring's read position is written back so the worker can reuse the room.
"""

from __future__ import annotations

import logging
import socket
import struct

import numpy as np

from tritium.core import InferRequest, InferResponse, OutputTensor
from tritium.core.datatypes import RAW_DTYPES
from tritium.core.errors import InternalError, TritiumError, Unavailable, error_from_code
from tritium.ipc import Arena, recv_fd
from tritium.ipc import tensors as ipc_tensors
from tritium.ipc.arena import ALIGN_MASK
from tritium.ipc.messages import Response

log = logging.getLogger("tritium.workers")

#: Decoupled requests one instance may hold open at once (sent and not final).
MAX_OPEN = 4096
_CONSUMED = struct.Struct("<Q")


class ResponseStreams:
    """The open decoupled requests of one worker, their flags and the response ring."""

    def __init__(self, label: str, flags: Arena, fd_sock: socket.socket) -> None:
        self.label = label
        self.flags = flags
        self._fd_sock = fd_sock
        # Slots come from ``_free`` (returned ones) first, then ``_unused`` upwards: a
        # worker that never opens many requests never holds a list of MAX_OPEN numbers.
        self._free: list[int] = []
        self._unused = 0
        self._open: dict[int, InferRequest] = {}
        self._ring: Arena | None = None

    @property
    def open_count(self) -> int:
        return len(self._open)

    def open(self, batch: list[InferRequest]) -> list[int]:
        """A slot per request of ``batch`` (raises UNAVAILABLE when too many are open)."""
        if len(batch) > len(self._free) + MAX_OPEN - self._unused:
            raise Unavailable(f"instance '{self.label}' has too many decoupled requests in flight")
        slots = []
        buf = self.flags.buf
        assert buf is not None
        for request in batch:
            if self._free:
                slot = self._free.pop()
            else:
                slot = self._unused
                self._unused += 1
            buf[slot] = 0
            self._open[slot] = request
            slots.append(slot)
        return slots

    def cancel(self, request: InferRequest) -> None:
        for slot, held in self._open.items():
            if held is request and self.flags.buf is not None:
                self.flags.buf[slot] = 1
                return

    def on_response(self, message: Response) -> None:
        """One response message: copy its outputs out and hand them to the request."""
        if message.ring:
            self._take_ring(message.ring)
        slot = message.slot
        final = message.final
        request = self._open.get(slot)
        response: InferResponse | None = None
        try:
            if message.outputs is not None or message.error is not None:
                response = self._read(message, request)
        except (TritiumError, KeyError, TypeError, ValueError) as exc:
            log.exception("%s: malformed response from worker", self.label)
            response = InferResponse("", "")
            response.error = (
                exc if isinstance(exc, TritiumError) else InternalError("malformed response")
            )
        finally:
            ring = self._ring
            if message.upto is not None and ring is not None and ring.buf is not None:
                _CONSUMED.pack_into(ring.buf, 0, message.upto)
        if request is None:
            log.warning("%s: response for a request that is not open (slot %s)", self.label, slot)
            return
        if final:
            del self._open[slot]
            self._free.append(slot)
        sink = request.responses
        if sink is not None:
            try:
                sink.on_response(response, final)
            except Exception:  # noqa: BLE001 - one consumer's bug must not cut the worker off
                log.exception("%s: a response consumer failed", self.label)

    def _read(self, message: Response, request: InferRequest | None) -> InferResponse:
        name = request.model_name if request is not None else ""
        version = request.model_version if request is not None else ""
        response = InferResponse(name, version, request.id if request is not None else "")
        err = message.error
        if err is not None:
            response.error = error_from_code(err[0], err[1])
            return response
        params = message.params
        if params:
            response.parameters = params
        outputs = message.outputs
        if not outputs:
            return response
        size = 0
        for _, _, _, nbytes in outputs:
            size = (size + nbytes + ALIGN_MASK) & ~ALIGN_MASK
        block = bytearray()
        if size:  # outputs with no bytes at all travel without the ring
            ring = self._ring
            start = message.off
            if ring is None or ring.buf is None or start + size > ring.size:
                raise InternalError(f"instance '{self.label}' returned a malformed response")
            block = bytearray(memoryview(ring.buf)[start : start + size])
        pos = 0
        dtypes = RAW_DTYPES
        tensors = response.outputs
        for name, datatype, shape, nbytes in outputs:
            off = pos
            pos = (off + nbytes + ALIGN_MASK) & ~ALIGN_MASK
            dtype = dtypes.get(datatype)
            if dtype is None:  # BYTES
                data = ipc_tensors.copy_out(block, datatype, shape, off, nbytes)  # type: ignore[arg-type]
            elif nbytes:
                data = np.ndarray(shape, dtype, block, off)
            else:
                data = np.empty(shape, dtype)
            tensors.append(OutputTensor(name, datatype, tuple(data.shape), data))
        return response

    def _take_ring(self, size: int) -> None:
        fd = recv_fd(self._fd_sock)
        old, self._ring = self._ring, Arena(fd, size)
        if old is not None:
            old.close()

    def fail_all(self, error: TritiumError) -> None:
        """The worker is gone: every open request ends with ``error``."""
        open_requests, self._open = self._open, {}
        self._free = []
        self._unused = 0
        for request in open_requests.values():
            sink = request.responses
            if sink is not None:
                response = InferResponse(request.model_name, request.model_version, request.id)
                response.error = error
                try:
                    sink.on_response(response, True)
                except Exception:  # noqa: BLE001 - the others still get their error
                    log.exception("%s: a response consumer failed", self.label)

    def close(self) -> None:
        if self._ring is not None:
            self._ring.close()
            self._ring = None
        self.flags.close()
