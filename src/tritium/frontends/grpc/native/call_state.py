"""The state of one native gRPC call and the ways it ends: an error status, its deadline,
a reset by the client; and the framing (with compression) of a message it sends.

:class:`CallState` is the lowest layer of :class:`~.call.GrpcCall`; it declares every
slot of a call, which ``GrpcCall.__init__`` fills.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from typing import Any

from tritium.core.completion import Completion
from tritium.core.trace_context import TRACEPARENT, propagated
from tritium.frontends.grpc.calls import Method
from tritium.frontends.grpc.infer_calls import InferStream
from tritium.frontends.grpc.infer_response_bytes import SplitMessage
from tritium.frontends.grpc.native import grpc_wire as w
from tritium.frontends.grpc.native.call_host import CallHost
from tritium.frontends.grpc.native.connection import H2Connection, Stream

logger = logging.getLogger("tritium.frontends.grpc")


class CallState:
    """One stream's call: what it is, how far it got, and how it ends."""

    __slots__ = (
        "proto",
        "conn",
        "stream",
        "method",
        "metadata",
        "reader",
        "encoding",
        "out_encoding",
        "timer",
        "future",
        "finish",
        "request",
        "infer_stream",
        "head_sent",
        "closed",
        "compressing",
        "waiting_bytes",
        "idle_pending",
    )

    proto: CallHost
    conn: H2Connection
    stream: Stream
    method: Method
    #: Custom request metadata (header name → value; ``-bin`` values still base64);
    #: shared by calls with the same header block, so read-only.
    metadata: dict[str, str]
    #: Made on the first DATA payload that is not exactly one whole message.
    reader: w.MessageReader | None
    encoding: str | None
    out_encoding: str | None
    timer: asyncio.TimerHandle | None
    #: The work in flight: a submission's completion, or a task.
    future: Completion | asyncio.Task | None
    finish: Any
    request: Any
    infer_stream: InferStream | None
    head_sent: bool
    closed: bool
    #: A stream's messages waiting, in order, behind one compressed on a thread.
    compressing: deque[Any] | None
    waiting_bytes: int  # their size, bounded as a stream's unsent bytes are
    idle_pending: bool  # the stream ended while messages were waiting

    def _trace_context(self) -> dict[str, str] | None:
        metadata = self.metadata
        return propagated(metadata) if TRACEPARENT in metadata else None

    def _frame(self, payload: Any, encoding: str | None) -> tuple[bytes | None, Any]:
        if len(payload) > self.proto.max_message_length:
            self.fail(
                w.RESOURCE_EXHAUSTED,
                f"Sent message larger than max ({len(payload)} vs. "
                f"{self.proto.max_message_length})",
            )
            return None, b""
        if encoding is not None:
            payload = compress_message(encoding, payload, self.proto.compression_level)
            return w.message_prefix(len(payload), True), payload
        return w.message_prefix(len(payload)), payload

    def _end(self, code: int, message: str) -> None:
        if self.closed:
            return
        self._close()
        if self.proto.debug:
            if code == w.OK:  # a stream that ended well: the words of a unary OK
                logger.debug("GRPC call: %s: status 0 (OK)", self.method.name)
            else:
                logger.debug("GRPC call: %s: status %d: %s", self.method.name, code, message)
        if self.head_sent:
            self.conn.send_trailers(self.stream, w.trailers(code, message))
        else:
            self.conn.send_headers(self.stream, w.trailers_only(code, message), end_stream=True)

    def fail(self, code: int, message: str) -> None:
        """End the call with an error status; pending work is cancelled."""
        if self.closed:
            return
        self._cancel_work()
        self._end(code, message)

    # ------------------------------------------------------------ cancellation

    def _close(self) -> None:
        self.closed = True
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None

    def _cancel_work(self) -> None:
        if self.future is not None:
            self.future.cancel()
            self.future = None
        if self.infer_stream is not None:
            self.infer_stream.cancel()

    def expire(self) -> None:
        """The call's deadline passed."""
        self.timer = None
        if not self.closed:
            self.fail(w.DEADLINE_EXCEEDED, "Deadline Exceeded")
            self.proto.schedule_flush()

    def on_reset(self) -> None:
        """The client reset the stream (or the connection went away)."""
        if not self.closed:
            self._close()
            self._cancel_work()


def compress_message(encoding: str, payload: bytes | SplitMessage, level: int) -> bytes:
    """``payload`` compressed with ``encoding`` (a split message is joined first)."""
    if type(payload) is SplitMessage:
        payload = payload.joined()
    return w.compress(encoding, payload, level)  # type: ignore[arg-type]
