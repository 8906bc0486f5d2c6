"""One native gRPC call on one HTTP/2 stream: its request messages decoded, the method
from ``calls`` run, and a unary answer framed and sent with its status.

A unary ModelInfer never gets a task: the request is submitted when its last DATA
frame arrives and the response is written from the scheduler future's done callback.
Deadlines (``grpc-timeout``) and resets cancel that future (or the handler's task), so
work still queued is dropped.

:class:`GrpcCall` is built in layers: ``call_state`` (the call's slots and how it ends)
under ``stream_replies`` (a streamed call's replies) under this module's request and
unary answer; ``call_opening`` checks the headers and starts it.
"""

from __future__ import annotations

import asyncio
import logging
import struct
from typing import Any

from google.protobuf.message import DecodeError

from tritium.core.completion import Completion
from tritium.frontends.grpc.calls import STREAM, Method
from tritium.frontends.grpc.infer_calls import InferStream, call_status
from tritium.frontends.grpc.infer_response_bytes import SplitMessage
from tritium.frontends.grpc.native import grpc_wire as w
from tritium.frontends.grpc.native.call_host import CallHost
from tritium.frontends.grpc.native.call_state import compress_message
from tritium.frontends.grpc.native.connection import Stream
from tritium.frontends.grpc.native.stream_replies import StreamReplies
from tritium.frontends.offload import OFFLOAD_BYTES, off_loop

logger = logging.getLogger("tritium.frontends.grpc")

_pack_prefix = struct.Struct(">BL").pack  # a gRPC message prefix: compressed flag, length


class GrpcCall(StreamReplies):
    """The receiver of one stream's request and the writer of its response."""

    __slots__ = ()

    def __init__(
        self,
        proto: CallHost,
        stream: Stream,
        method: Method,
        metadata: dict[str, str],
        encoding: str | None,
        out_encoding: str | None,
    ) -> None:
        self.proto = proto
        self.conn = proto.conn
        self.stream = stream
        self.method = method
        self.metadata = metadata
        self.reader = None
        self.encoding = encoding
        self.out_encoding = out_encoding
        self.timer = None
        self.future = None
        self.finish = None
        self.request = None
        self.infer_stream = None
        self.head_sent = False
        self.closed = False
        self.compressing = None
        self.waiting_bytes = 0
        self.idle_pending = False
        if method.kind == STREAM:
            self.infer_stream = InferStream(
                proto.service, self._emit, proto.plans, self._trace_context()
            )

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

    def _unary_done(self, future: Completion | asyncio.Task) -> None:
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
            prefix = _pack_prefix(0, len(payload))
        else:
            framed, payload = self._frame(payload, encoding)
            if framed is None:
                proto.schedule_flush()
                return
            prefix = framed
        self._send_final(encoding, prefix, payload)

    async def _send_compressed(self, payload: bytes | SplitMessage, encoding: str) -> None:
        proto = self.proto
        try:
            data = await off_loop(compress_message, encoding, payload, proto.compression_level)
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
        if self.proto.debug:
            logger.debug("GRPC call: %s: status 0 (OK)", self.method.name)
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
