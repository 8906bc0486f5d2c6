"""The replies of a streamed native gRPC call (ModelStreamInfer): each message framed and
sent as it is produced, big ones compressed on a thread with the later ones waiting their
turn behind them (bounded like a stream's unsent bytes), and the stream ended once the
last reply is out.
"""

from __future__ import annotations

import logging
from collections import deque
from typing import Any

from tritium.frontends.grpc.infer_response_bytes import SplitMessage
from tritium.frontends.grpc.native import grpc_wire as w
from tritium.frontends.grpc.native.call_state import CallState, compress_message
from tritium.frontends.grpc.native.frames import ENHANCE_YOUR_CALM
from tritium.frontends.grpc.native.sending import MAX_QUEUED_BYTES
from tritium.frontends.grpc.open_streams import end_when_idle
from tritium.frontends.offload import OFFLOAD_BYTES, off_loop

logger = logging.getLogger("tritium.frontends.grpc")

#: How a stream ended by the server's shutdown says so (the request path's refusal text).
SHUTTING_DOWN = "Server is shutting down"


class StreamReplies(CallState):
    """Sending a streamed call's replies; see the module docstring."""

    __slots__ = ()

    def _emit(self, reply: Any) -> None:
        if self.closed:
            return
        encoding = self.out_encoding
        kind = type(reply)
        payload = reply if kind is bytes or kind is SplitMessage else reply.SerializeToString()
        proto = self.proto
        if len(payload) > proto.max_message_length:
            self._frame(payload, encoding)  # fails the call
            return
        flag = 0
        if encoding is not None:
            if self.compressing is not None or len(payload) >= OFFLOAD_BYTES:
                # Compressing a big message would hold every other client: done on a
                # thread, and the stream's later messages wait their turn behind it.
                if self.waiting_bytes + self.stream.queued >= MAX_QUEUED_BYTES:
                    # The client let too many replies pile up unread.
                    self.conn.reset_stream(self.stream, ENHANCE_YOUR_CALM)
                    self._close()
                    self._cancel_work()
                    proto.schedule_flush()
                    return
                if self.compressing is None:
                    self.compressing = deque()
                    proto.loop.create_task(self._compress_in_order(encoding))
                self.compressing.append(payload)
                self.waiting_bytes += len(payload)
                return
            payload = w.compress(encoding, payload, proto.compression_level)
            flag = 1
        self._send_message(flag, payload, kind is SplitMessage)

    async def _compress_in_order(self, encoding: str) -> None:
        proto = self.proto
        waiting = self.compressing
        assert waiting is not None
        try:
            while waiting:
                payload = waiting.popleft()
                self.waiting_bytes -= len(payload)
                if len(payload) >= OFFLOAD_BYTES:
                    data = await off_loop(
                        compress_message, encoding, payload, proto.compression_level
                    )
                else:
                    data = w.compress(encoding, payload, proto.compression_level)
                if self.closed:
                    return
                self._send_message(1, data, False)
        except Exception as exc:  # noqa: BLE001 - the call must end, whatever happened
            logger.error("compressing a gRPC response failed", exc_info=exc)
            self.fail(w.INTERNAL, "failed to compress the response")
            proto.schedule_flush()
            return
        finally:
            self.compressing = None
            self.waiting_bytes = 0
        if self.idle_pending:
            self._stream_idle()

    def _send_message(self, flag: int, payload: Any, split: bool) -> None:
        proto = self.proto
        if not self.head_sent:
            self.head_sent = True
            self.conn.send_headers(self.stream, w.RESPONSE_HEAD[self.out_encoding])
        if split:
            # A big response: framed where its parts lie, never joined.
            sent = self.conn.send_message_parts(self.stream, payload.parts)
        else:
            sent = self.conn.send_message(self.stream, flag, payload)
        if not sent:
            # Reset: the client let too many replies pile up unread.
            self._close()
            self._cancel_work()
        proto.schedule_flush()

    def end_at_shutdown(self) -> None:
        """The server is stopping: end this stream now when no request of it is pending,
        else once its last pending request has been answered (UNAVAILABLE either way, so
        the client knows to go elsewhere). A unary call is left to finish."""
        if self.infer_stream is not None and not self.closed:
            end_when_idle(self.infer_stream, self._shutdown_idle)

    def _shutdown_idle(self) -> None:
        if self.compressing is not None:
            self.idle_pending = True  # ended once the waiting messages are sent
            return
        if not self.closed:
            self._end(w.UNAVAILABLE, SHUTTING_DOWN)
            self.proto.schedule_flush()

    def _stream_idle(self) -> None:
        if self.compressing is not None:
            self.idle_pending = True  # ended once the waiting messages are sent
            return
        if not self.closed:
            self._end(w.OK, "")
            self.proto.schedule_flush()
