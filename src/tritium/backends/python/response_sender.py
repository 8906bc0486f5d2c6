"""Decoupled responses on the worker side: ``request.get_response_sender()``.

Each ``send`` writes the response's outputs into a ring of shared memory that this worker
owns (a memfd, so nothing can leak) and sends one ``resp`` control message naming the
request's slot: responses reach the server as they are sent, in order per request, from
any thread. The server copies a response out of the ring when its message arrives and
then records how far it has read in the ring's first eight bytes; a sender waits for room
only when the ring is full. A response bigger than the ring gets a bigger one: its
descriptor goes to the server first, then the message that starts using it.
"""

from __future__ import annotations

import socket
import struct
import threading
import time
import traceback
from collections.abc import Callable
from typing import Any

from tritium.backends.python.pb_utils_errors import TritonError, TritonModelException, error_pair
from tritium.backends.python.pb_utils_messages import InferenceResponse
from tritium.core.datatypes import serialize_bytes
from tritium.ipc import Arena, grow_size, send_fd
from tritium.ipc import tensors as ipc_tensors
from tritium.ipc.arena import ALIGN_MASK
from tritium.ipc.messages import Response, TensorDesc

COMPLETE_FINAL = 1

#: Bytes at the start of the ring before the data: the server's read position.
RING_HEADER = 64
_CONSUMED = struct.Struct("<Q")
_MIN_RING = 1 << 20
#: How long a send waits for the server to read the ring before it gives up.
RING_WAIT_S = 120.0


class ResponseStream:
    """The worker's one path for decoupled responses (thread-safe).

    ``send_message`` writes one control message (the worker's, under its own lock);
    ``fds`` carries a new ring's descriptor to the server.
    """

    def __init__(self, send_message: Callable[[Response], None], fds: socket.socket) -> None:
        self._send_message = send_message
        self._fds = fds
        self._lock = threading.Lock()
        self._ring: Arena | None = None
        self._produced = 0  # bytes handed out in the current ring, ever

    def send(
        self, slot: int, wanted: set[str], response: InferenceResponse | None, final: bool
    ) -> None:
        message = Response(slot, final)
        if response is not None:
            if response._error is not None:
                message.error = error_pair(response._error)
            else:
                params = response._parameters_dict
                if params:
                    message.params = params
                outputs: list[TensorDesc] = []
                blocks: list[tuple[int, Any, bytes | None]] = []
                size = 0
                for tensor in response._output_tensors:
                    name = tensor._name
                    if name not in wanted:
                        continue
                    wire = tensor._datatype
                    array = tensor._array
                    raw = serialize_bytes(array) if wire == "BYTES" else None
                    nbytes = len(raw) if raw is not None else array.nbytes
                    outputs.append((name, wire, list(array.shape), nbytes))
                    blocks.append((size, array, raw))
                    size = (size + nbytes + ALIGN_MASK) & ~ALIGN_MASK
                message.outputs = outputs
                if size:
                    with self._lock:
                        self._write(message, blocks, size)
                    return
        with self._lock:
            self._send_message(message)

    def _write(
        self, message: Response, blocks: list[tuple[int, Any, bytes | None]], size: int
    ) -> None:
        """Place ``size`` bytes in the ring, write the outputs, send ``message``; under the
        lock, so ring order is message order."""
        ring = self._ring
        if ring is None or size > ring.size - RING_HEADER:
            # A fresh ring: the server switches to it on this message; the old one's
            # messages all came before, so it has read them.
            new = Arena.create(grow_size(size + RING_HEADER, _MIN_RING))
            send_fd(self._fds, new.fd)
            message.ring = new.size
            if ring is not None:
                ring.close()
            self._ring = ring = new
            self._produced = 0
        capacity = ring.size - RING_HEADER
        pos = self._produced % capacity
        start = self._produced
        if pos + size > capacity:  # no wrapping inside a response: skip to the start
            start += capacity - pos
            pos = 0
        end = start + size
        self._wait_for_room(ring, end - capacity)
        self._produced = end
        buf = ring.buf
        assert buf is not None
        base = RING_HEADER + pos
        write = ipc_tensors.write
        for offset, array, raw in blocks:
            write(buf, base + offset, array, raw)
        message.off = base
        message.upto = end
        self._send_message(message)

    def _wait_for_room(self, ring: Arena, needed: int) -> None:
        """Wait until the server has read up to ``needed`` bytes of the ring."""
        buf = ring.buf
        assert buf is not None
        if _CONSUMED.unpack_from(buf, 0)[0] >= needed:
            return
        deadline = time.monotonic() + RING_WAIT_S
        pause = 0.0001
        while _CONSUMED.unpack_from(buf, 0)[0] < needed:
            if time.monotonic() > deadline:
                raise TritonModelException(
                    "Unable to send response: the server did not take earlier responses"
                )
            time.sleep(pause)
            pause = min(pause * 2, 0.005)

    def close(self) -> None:
        with self._lock:
            if self._ring is not None:
                self._ring.close()
                self._ring = None


class ResponseSender:
    """Triton's ``InferenceResponseSender`` for one request of a decoupled model."""

    __slots__ = ("_stream", "_slot", "_wanted", "_is_cancelled", "_closed", "_lock")

    def __init__(
        self,
        stream: ResponseStream,
        slot: int,
        wanted: set[str],
        is_cancelled: Callable[[], bool],
    ) -> None:
        self._stream = stream
        self._slot = slot
        self._wanted = wanted
        self._is_cancelled = is_cancelled
        self._closed = False
        self._lock = threading.Lock()

    def send(self, response: InferenceResponse | None = None, flags: int = 0) -> None:
        if flags not in (0, COMPLETE_FINAL):
            raise TritonModelException(
                "response_sender.send() only supports 0 or TRITONSERVER_RESPONSE_COMPLETE_FINAL "
                "for flags"
            )
        if response is None and flags != COMPLETE_FINAL:
            raise TritonModelException(
                "Inference Response object must be provided when the response flags is set to zero"
            )
        if response is not None and not isinstance(response, InferenceResponse):
            raise TritonModelException(
                f"Expected an 'InferenceResponse' object, found type '{type(response).__name__}'"
            )
        final = flags == COMPLETE_FINAL
        with self._lock:
            if self._closed:
                raise TritonModelException(
                    "Unable to send response. Response sender has been closed."
                )
            if final:
                self._closed = True
            try:
                self._stream.send(self._slot, self._wanted, response, final)
            except TritonModelException:
                raise
            except Exception as exc:
                traceback.print_exc()
                raise TritonModelException(f"Unable to send response: {exc}") from exc

    def is_cancelled(self) -> bool:
        return self._is_cancelled()

    def _fail(self, message: str) -> None:
        """End the request with an error if the model has not ended it (execute raised)."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            response = InferenceResponse(error=TritonError(message))
            try:
                self._stream.send(self._slot, self._wanted, response, True)
            except Exception:  # noqa: BLE001 - the worker is going down with the socket
                traceback.print_exc()
