"""One gRPC call on one HTTP/2 stream: request headers checked, messages decoded, the
method from ``calls`` run, the answer framed and the stream ended with a status.

A unary ModelInfer never gets a task: the request is submitted when its last DATA
frame arrives and the response is written from the scheduler future's done callback.
Deadlines (``grpc-timeout``) and resets cancel that future (or the handler's task), so
work still queued is dropped.
"""

from __future__ import annotations

import asyncio
import logging
import struct
from collections import deque
from typing import TYPE_CHECKING, Any

from google.protobuf.message import DecodeError

from tritium.core.completion import Completion
from tritium.core.trace_context import TRACEPARENT, propagated
from tritium.frontends.grpc.calls import METHODS, STREAM, Method
from tritium.frontends.grpc.infer_calls import InferStream, call_status
from tritium.frontends.grpc.infer_response_bytes import SplitMessage
from tritium.frontends.grpc.native import grpc_wire as w
from tritium.frontends.grpc.native.connection import H2Connection, Stream
from tritium.frontends.grpc.native.frames import ENHANCE_YOUR_CALM
from tritium.frontends.grpc.native.sending import MAX_QUEUED_BYTES
from tritium.frontends.offload import OFFLOAD_BYTES, off_loop
from tritium.frontends.restricted import RestrictedApis, Restriction, grpc_method_group

if TYPE_CHECKING:
    from tritium.frontends.grpc.native.server import GrpcProtocol

logger = logging.getLogger("tritium.frontends.grpc")

_pack_prefix = struct.Struct(">BL").pack  # a gRPC message prefix: compressed flag, length
_TRANSPORT_HEADERS = frozenset(
    ("content-type", "te", "grpc-timeout", "grpc-encoding", "grpc-accept-encoding")
)


class GrpcCall:
    """The receiver of one stream's request and the writer of its response."""

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

    def __init__(
        self,
        proto: GrpcProtocol,
        stream: Stream,
        method: Method,
        metadata: dict[str, str],
        encoding: str | None,
        out_encoding: str | None,
    ) -> None:
        self.proto = proto
        self.conn: H2Connection = proto.conn
        self.stream = stream
        self.method = method
        #: Custom request metadata (header name → value; ``-bin`` values still base64);
        #: shared by calls with the same header block, so read-only.
        self.metadata = metadata
        #: Made on the first DATA payload that is not exactly one whole message.
        self.reader: w.MessageReader | None = None
        self.encoding = encoding
        self.out_encoding = out_encoding
        self.timer: asyncio.TimerHandle | None = None
        self.future: Completion | None = None
        self.finish: Any = None
        self.request: Any = None
        self.infer_stream: InferStream | None = None
        self.head_sent = False
        self.closed = False
        # A stream's messages waiting, in order, behind one compressed on a thread.
        self.compressing: deque[Any] | None = None
        self.waiting_bytes = 0  # their size, bounded as a stream's unsent bytes are
        self.idle_pending = False  # the stream ended while messages were waiting
        if method.kind == STREAM:
            self.infer_stream = InferStream(
                proto.service, self._emit, proto.plans, self._trace_context()
            )

    def _trace_context(self) -> dict[str, str] | None:
        metadata = self.metadata
        return propagated(metadata) if TRACEPARENT in metadata else None

    # ---------------------------------------------------------------- request

    def on_data(self, data: memoryview, end_stream: bool) -> None:
        if self.closed:
            return
        size = len(data)
        if size:
            reader = self.reader
            try:
                if (
                    reader is None
                    and size >= 5
                    and int.from_bytes(data[1:5], "big") == size - 5
                    and size - 5 <= self.proto.max_message_length
                ):
                    # The usual case: one DATA payload holds exactly one message.
                    self._message(data[0], data[5:])
                    if self.closed:
                        return
                else:
                    if reader is None:
                        reader = self.reader = w.MessageReader(self.proto.max_message_length)
                    for flag, raw in reader.feed(data):
                        self._message(flag, raw)
                        if self.closed:
                            return
            except w.WireError as exc:
                self.fail(exc.code, exc.message)
                return
        if end_stream:
            self._half_closed()

    def _message(self, flag: int, raw: memoryview) -> None:
        if flag & 1:
            if self.encoding is None:
                raise w.WireError(w.INTERNAL, "compressed message without a grpc-encoding header")
            raw = w.decompress(self.encoding, raw, self.proto.max_message_length)  # type: ignore[assignment]
        if self.infer_stream is not None:
            try:
                self.infer_stream.push_bytes(raw)
            except DecodeError:
                raise w.WireError(w.INTERNAL, "failed to parse the request message") from None
            return
        if self.request is not None:
            raise w.WireError(w.UNIMPLEMENTED, "more than one request message for a unary call")
        if self.method.begin_bytes is not None:
            # Decoded when the call starts; the buffer behind the view is never reused.
            self.request = raw
            return
        try:
            self.request = self.method.request_type.FromString(raw)
        except DecodeError:
            raise w.WireError(w.INTERNAL, "failed to parse the request message") from None

    def _half_closed(self) -> None:
        if self.infer_stream is not None:
            if self.infer_stream.pending:
                self.infer_stream.on_idle = self._stream_idle
            else:
                self._end(w.OK, "")
            return
        if self.request is None:
            self.fail(w.UNIMPLEMENTED, "no request message for a unary call")
            return
        method, request, self.request = self.method, self.request, None
        service = self.proto.service
        if method.begin_bytes is not None:
            try:
                future, self.finish = method.begin_bytes(
                    service, self.proto.plans, request, self._trace_context()
                )
            except DecodeError:
                self.fail(w.INTERNAL, "failed to parse the request message")
                return
            except Exception as exc:
                self.fail(*call_status(exc, method.name))
                return
            self.future = future
            future.add_done_callback(self._unary_done)
        elif method.begin is not None:
            try:
                future, self.finish = method.begin(service, request, self._trace_context())
            except Exception as exc:
                self.fail(*call_status(exc, method.name))
                return
            self.future = future
            future.add_done_callback(self._unary_done)
        else:
            task = self.proto.loop.create_task(method.handler(service, request))
            self.future = task
            task.add_done_callback(self._unary_done)

    # --------------------------------------------------------------- response

    def _unary_done(self, future: Completion) -> None:
        self.future = None
        if self.closed or future.cancelled():
            return
        proto = self.proto
        try:
            result = future.result()
            response = self.finish(result) if self.finish is not None else result
            payload = (
                response
                if type(response) is bytes or type(response) is SplitMessage
                else response.SerializeToString()
            )
        except Exception as exc:
            self.fail(*call_status(exc, self.method.name))
            proto.schedule_flush()
            return
        encoding = self.out_encoding if self.method.infer else None
        if encoding is not None and OFFLOAD_BYTES <= len(payload) <= proto.max_message_length:
            # Compressing a big answer would hold every other client: done on a thread.
            self.future = proto.loop.create_task(self._send_compressed(payload, encoding))
            return
        if encoding is None and len(payload) <= proto.max_message_length:
            prefix: bytes | None = _pack_prefix(0, len(payload))
        else:
            prefix, payload = self._frame(payload, encoding)
            if prefix is None:
                proto.schedule_flush()
                return
        self._send_final(encoding, prefix, payload)

    async def _send_compressed(self, payload: bytes | SplitMessage, encoding: str) -> None:
        proto = self.proto
        try:
            data = await off_loop(_compress, encoding, payload, proto.compression_level)
        except Exception as exc:  # noqa: BLE001 - the call must end, whatever happened
            self.future = None
            logger.error("compressing a gRPC response failed", exc_info=exc)
            self.fail(w.INTERNAL, "failed to compress the response")
            proto.schedule_flush()
            return
        self.future = None
        if self.closed:
            return
        self._send_final(encoding, w.message_prefix(len(data), True), data)

    def _send_final(self, encoding: str | None, prefix: bytes, payload: Any) -> None:
        """The call's one response message and its OK trailers, and the call is over."""
        self.closed = True
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        if type(payload) is SplitMessage:
            self.conn.send_response_parts(
                self.stream, w.RESPONSE_HEAD[encoding], [prefix, *payload.parts], w.TRAILERS_OK
            )
        else:
            self.conn.send_response(
                self.stream, w.RESPONSE_HEAD[encoding], prefix, payload, w.TRAILERS_OK
            )
        self.proto.schedule_flush()

    def _frame(self, payload: Any, encoding: str | None) -> tuple[bytes | None, Any]:
        if len(payload) > self.proto.max_message_length:
            self.fail(
                w.RESOURCE_EXHAUSTED,
                f"Sent message larger than max ({len(payload)} vs. "
                f"{self.proto.max_message_length})",
            )
            return None, b""
        if encoding is not None:
            payload = _compress(encoding, payload, self.proto.compression_level)
            return w.message_prefix(len(payload), True), payload
        return w.message_prefix(len(payload)), payload

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
                    data = await off_loop(_compress, encoding, payload, proto.compression_level)
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

    def _stream_idle(self) -> None:
        if self.compressing is not None:
            self.idle_pending = True  # ended once the waiting messages are sent
            return
        if not self.closed:
            self._end(w.OK, "")
            self.proto.schedule_flush()

    def _end(self, code: int, message: str) -> None:
        if self.closed:
            return
        self._close()
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


class _Refused:
    """Receiver of a stream answered at once (bad headers): ignores what follows."""

    __slots__ = ()

    def on_data(self, data: memoryview, end_stream: bool) -> None:
        pass

    def on_reset(self) -> None:
        pass


REFUSED = _Refused()


#: A checked request header list: (method, metadata, grpc-encoding, response encoding,
#: grpc-timeout) for a call to start, or the header block that refuses the stream.
_Checked = tuple[Method, dict[str, str], "str | None", "str | None", "str | None"] | bytes

#: Checked header lists kept per connection (the connection hands out the same list
#: object for a repeated header block, so repeated calls are checked once).
MAX_CHECKED = 64


def open_call(
    proto: GrpcProtocol, stream: Stream, headers: list[tuple[str, str]]
) -> GrpcCall | _Refused:
    """Check a new stream's request headers and start its call (or answer at once)."""
    memo = proto.checked_headers
    entry = memo.get(id(headers))
    if entry is not None and entry[0] is headers:
        checked = entry[1]
    else:
        checked = _check_headers(proto, headers)
        if len(memo) >= MAX_CHECKED:
            memo.clear()
        # The entry holds the list, so its id cannot be reused while it is kept.
        memo[id(headers)] = (headers, checked)
    if type(checked) is bytes:
        proto.conn.send_headers(stream, checked, end_stream=True)
        return REFUSED
    method, metadata, encoding, out_encoding, timeout = checked  # type: ignore[misc]
    call = GrpcCall(proto, stream, method, metadata, encoding, out_encoding)
    if timeout is not None:
        seconds = w.parse_timeout(timeout)
        if seconds is not None:
            call.timer = proto.loop.call_later(seconds, call.expire)
    return call


def _check_headers(proto: GrpcProtocol, headers: list[tuple[str, str]]) -> _Checked:
    path = method_name = content_type = timeout = encoding = accept = None
    metadata: dict[str, str] = {}
    size = 0
    for name, value in headers:
        size += len(name) + len(value) + 32
        if name[0] == ":":
            if name == ":path":
                path = value
            elif name == ":method":
                method_name = value
        elif name in _TRANSPORT_HEADERS:
            if name == "content-type":
                content_type = value
            elif name == "grpc-timeout":
                timeout = value
            elif name == "grpc-encoding":
                encoding = value
            elif name == "grpc-accept-encoding":
                accept = value
        else:
            metadata[name] = value
    if method_name != "POST":
        return w.http_error(405, w.INTERNAL, "gRPC requires POST")
    if content_type is None or not (
        content_type == "application/grpc"
        or content_type.startswith(("application/grpc+", "application/grpc;"))
    ):
        return w.http_error(415, w.UNKNOWN, f"invalid gRPC request content-type '{content_type}'")
    if size > proto.conn.max_header_list_size:
        return w.trailers_only(w.RESOURCE_EXHAUSTED, "request header list too large")
    method = METHODS.get(path or "")
    if method is None:
        return w.trailers_only(w.UNIMPLEMENTED, f"Method not found: {path}")
    restriction = proto.shared.restricted_paths.get(method.path)
    if restriction is not None and not restriction.allows(metadata.get(restriction.header)):
        return w.trailers_only(w.UNAVAILABLE, restriction.grpc_message())
    if encoding == "identity":
        encoding = None
    elif encoding is not None and encoding not in w.ENCODINGS:
        return w.trailers_only(
            w.UNIMPLEMENTED, f"Compression algorithm '{encoding}' is not supported"
        )
    out_encoding = w.response_encoding(accept, proto.response_compression) if method.infer else None
    return method, metadata, encoding, out_encoding, timeout


def restricted_paths(restricted: RestrictedApis) -> dict[str, Restriction]:
    """:path → restriction, for the methods whose group ``restricted`` restricts."""
    found = {}
    for path, method in METHODS.items():
        restriction = restricted.for_group(grpc_method_group(method.name))
        if restriction is not None:
            found[path] = restriction
    return found


def _compress(encoding: str, payload: bytes | SplitMessage, level: int) -> bytes:
    if type(payload) is SplitMessage:
        payload = payload.joined()
    return w.compress(encoding, payload, level)  # type: ignore[arg-type]
