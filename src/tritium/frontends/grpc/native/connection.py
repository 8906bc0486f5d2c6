"""The server side of one HTTP/2 connection as a sans-IO state machine (RFC 9113).

Bytes go in through :meth:`H2Connection.receive`; bytes to write accumulate in
``out`` (take them with :meth:`H2Connection.data_to_send`). Streams are announced to a
:class:`StreamHandler`, which returns the :class:`StreamReceiver` that gets the stream's
DATA and its reset. Flow control, SETTINGS, PING (and the ping-abuse policy), stream-id
rules, RST_STREAM, GOAWAY, padding and priority are handled (the control frames in
``control_frames``); a connection error queues GOAWAY and sets ``closed``, a stream error
queues RST_STREAM and drops only that stream. Frame payload views passed to receivers
are only valid during the call.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Protocol

from tritium.frontends.grpc.native import frames as f
from tritium.frontends.grpc.native.control_frames import ControlFrames, ProtocolFailure
from tritium.frontends.grpc.native.header_blocks import HeaderBlockDecoder, HeaderBlockError
from tritium.frontends.grpc.native.sending import Stream

_HEADER = f.HEADER
_EMPTY = memoryview(b"")


class StreamReceiver(Protocol):
    def on_data(self, data: memoryview, end_stream: bool) -> None: ...
    def on_reset(self) -> None: ...


__all__ = ["H2Connection", "ProtocolFailure", "Stream", "StreamHandler", "StreamReceiver"]


class StreamHandler(Protocol):
    def stream_opened(self, stream: Stream, headers: list[tuple[str, str]]) -> StreamReceiver: ...


class H2Connection(ControlFrames):
    """HTTP/2 server connection state; see the module docstring."""

    def __init__(
        self,
        handler: StreamHandler,
        *,
        max_concurrent_streams: int = 1024,
        initial_window: int = 4 * 1024 * 1024,
        connection_window: int = 16 * 1024 * 1024,
        max_frame_size: int = f.DEFAULT_MAX_FRAME_SIZE,
        max_header_list_size: int = 64 * 1024,
        max_header_block: int = 1024 * 1024,
        min_ping_interval: float = 300.0,
        max_ping_strikes: int = 2,
        permit_idle_pings: bool = False,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        super().__init__()
        self.handler = handler
        self.closed = False
        self.goaway_sent = False
        self.peer_goaway = False
        self.last_stream_id = 0
        self.max_concurrent_streams = max_concurrent_streams
        self.local_window = initial_window
        self.max_frame_size = max_frame_size
        self.max_header_list_size = max_header_list_size
        self.max_header_block = max_header_block
        self.conn_window = connection_window
        self._recv_window = connection_window
        self._conn_consumed = 0
        # Frame reassembly.
        self._preface = False
        self._buf = bytearray()
        self._need = len(f.PREFACE)
        self._hb_stream = 0
        self._hb_flags = 0
        self._hb_parts: list[bytes] = []
        self._hb_size = 0
        # HPACK: decoded blocks are cached while the decoder's table cannot change.
        self._headers = HeaderBlockDecoder(max_header_block)
        # Ping abuse policy (grpc's chttp2 rules).
        self._clock = clock
        self.min_ping_interval = min_ping_interval
        self.max_ping_strikes = max_ping_strikes
        self.permit_idle_pings = permit_idle_pings
        self.on_ping_ack: Callable[[bytes], None] | None = None
        self._dispatch = {
            f.DATA: self._on_data,
            f.HEADERS: self._on_headers,
            f.PRIORITY: self._on_priority,
            f.RST_STREAM: self._on_rst_stream,
            f.SETTINGS: self._on_settings,
            f.PUSH_PROMISE: self._on_push_promise,
            f.PING: self._on_ping,
            f.GOAWAY: self._on_goaway,
            f.WINDOW_UPDATE: self._on_window_update,
        }

    # ------------------------------------------------------------- lifecycle

    def initiate(self) -> None:
        """Queue the server's connection preface (SETTINGS, connection window)."""
        self.out.append(
            f.settings_frame(
                {
                    f.SETTINGS_MAX_CONCURRENT_STREAMS: self.max_concurrent_streams,
                    f.SETTINGS_INITIAL_WINDOW_SIZE: self.local_window,
                    f.SETTINGS_MAX_FRAME_SIZE: self.max_frame_size,
                    f.SETTINGS_MAX_HEADER_LIST_SIZE: self.max_header_list_size,
                    f.SETTINGS_ENABLE_PUSH: 0,
                }
            )
        )
        if self.conn_window > f.DEFAULT_WINDOW:
            self.out.append(f.window_update_frame(0, self.conn_window - f.DEFAULT_WINDOW))

    def goaway(self, code: int = f.NO_ERROR, debug: bytes = b"") -> None:
        """Refuse new streams from now on; open streams may finish."""
        if not self.goaway_sent and not self.closed:
            self.goaway_sent = True
            self.out.append(f.goaway_frame(self.last_stream_id, code, debug))

    def ping(self, opaque: bytes) -> None:
        self.out.append(f.ping_frame(opaque))

    def _fail(self, failure: ProtocolFailure) -> None:
        if not self.closed:
            self.out.append(
                f.goaway_frame(self.last_stream_id, failure.code, failure.message.encode()[:256])
            )
            self.goaway_sent = True
            self.closed = True
        self.connection_lost()

    def connection_lost(self) -> None:
        """The transport is gone: every open stream is reset."""
        self.closed = True
        streams, self.streams = self.streams, {}
        self._blocked.clear()
        for stream in streams.values():
            if stream.receiver is not None:
                stream.receiver.on_reset()

    # --------------------------------------------------------------- receive

    def receive(self, data: bytes | bytearray) -> None:
        """Process bytes from the peer (any split)."""
        if self.closed:
            return
        if self._buf:
            self._buf += data
            if len(self._buf) < self._need:
                return
            data, self._buf = self._buf, bytearray()
        elif len(data) < self._need:
            self._buf += data
            return
        view = memoryview(data)
        try:
            pos = self._parse(view)
        except ProtocolFailure as failure:
            self._fail(failure)
            return
        if pos < len(view) and not self.closed:
            self._buf = bytearray(view[pos:])

    def _parse(self, view: memoryview) -> int:
        n = len(view)
        pos = 0
        if not self._preface:
            if bytes(view[:24]) != f.PREFACE:
                raise ProtocolFailure(f.PROTOCOL_ERROR, "invalid connection preface")
            self._preface = True
            pos = 24
        unpack = _HEADER.unpack_from
        dispatch = self._dispatch
        max_frame = self.max_frame_size
        while n - pos >= 9:
            hi, lo, kind, flags, sid = unpack(view, pos)
            length = (hi << 8) | lo
            if length > max_frame:
                raise ProtocolFailure(f.FRAME_SIZE_ERROR, f"frame of {length} bytes is too large")
            end = pos + 9 + length
            if end > n:
                self._need = end - pos
                return pos
            payload = view[pos + 9 : end]
            pos = end
            sid &= 0x7FFFFFFF
            if self._hb_stream and kind != f.CONTINUATION:
                raise ProtocolFailure(f.PROTOCOL_ERROR, "expected a CONTINUATION frame")
            method = dispatch.get(kind)
            if method is not None:
                method(flags, sid, payload)
            elif kind == f.CONTINUATION:
                self._on_continuation(flags, sid, payload)
            # Unknown frame types are ignored (RFC 9113 §5.5).
            if self.closed:
                return n
        self._need = 9
        return pos

    # ---------------------------------------------------------------- frames

    @staticmethod
    def _strip_padding(flags: int, payload: memoryview) -> memoryview:
        if flags & f.PADDED:
            if not len(payload):
                raise ProtocolFailure(f.FRAME_SIZE_ERROR, "padded frame without pad length")
            pad = payload[0]
            if pad >= len(payload):
                raise ProtocolFailure(f.PROTOCOL_ERROR, "padding exceeds the frame payload")
            return payload[1 : len(payload) - pad]
        return payload

    def _on_data(self, flags: int, sid: int, payload: memoryview) -> None:
        if sid == 0:
            raise ProtocolFailure(f.PROTOCOL_ERROR, "DATA on stream 0")
        size = len(payload)
        self._recv_window -= size
        if self._recv_window < 0:
            raise ProtocolFailure(f.FLOW_CONTROL_ERROR, "connection flow-control window exceeded")
        self._conn_consumed += size
        if self._conn_consumed >= self.conn_window >> 1:
            self.out.append(f.window_update_frame(0, self._conn_consumed))
            self._recv_window += self._conn_consumed
            self._conn_consumed = 0
        data = self._strip_padding(flags, payload)
        stream = self.streams.get(sid)
        if stream is None:
            if sid > self.last_stream_id:
                raise ProtocolFailure(f.PROTOCOL_ERROR, f"DATA on idle stream {sid}")
            return  # a stream we closed or reset: its late frames are dropped
        if stream.remote_closed:
            self._stream_error(stream, f.STREAM_CLOSED)
            return
        end = bool(flags & f.END_STREAM)
        if end:
            stream.remote_closed = True
        else:
            consumed = stream.recv_consumed + size
            if consumed > self.local_window:
                self._stream_error(stream, f.FLOW_CONTROL_ERROR)
                return
            if consumed >= self.local_window >> 1:
                self.out.append(f.window_update_frame(sid, consumed))
                consumed = 0
            stream.recv_consumed = consumed
        stream.receiver.on_data(data, end)  # type: ignore[union-attr]
        if end and stream.local_closed:
            self.streams.pop(sid, None)

    def _on_headers(self, flags: int, sid: int, payload: memoryview) -> None:
        if sid == 0:
            raise ProtocolFailure(f.PROTOCOL_ERROR, "HEADERS on stream 0")
        block = self._strip_padding(flags, payload)
        if flags & f.PRIORITY_FLAG:
            if len(block) < 5:
                raise ProtocolFailure(f.FRAME_SIZE_ERROR, "HEADERS priority fields truncated")
            block = block[5:]
        if len(block) > self.max_header_block:
            raise ProtocolFailure(f.ENHANCE_YOUR_CALM, "header block too large")
        if flags & f.END_HEADERS:
            self._headers_complete(sid, flags, bytes(block))
        else:
            self._hb_stream, self._hb_flags = sid, flags
            self._hb_parts = [bytes(block)]
            self._hb_size = len(block)

    def _on_continuation(self, flags: int, sid: int, payload: memoryview) -> None:
        if not self._hb_stream or sid != self._hb_stream:
            raise ProtocolFailure(f.PROTOCOL_ERROR, "unexpected CONTINUATION frame")
        self._hb_size += len(payload)
        if self._hb_size > self.max_header_block:
            raise ProtocolFailure(f.ENHANCE_YOUR_CALM, "header block too large")
        self._hb_parts.append(bytes(payload))
        if flags & f.END_HEADERS:
            self._hb_stream = 0
            block, self._hb_parts = b"".join(self._hb_parts), []
            self._headers_complete(sid, self._hb_flags, block)

    def _decode(self, block: bytes) -> list[tuple[str, str]]:
        try:
            return self._headers.decode(block)
        except HeaderBlockError as exc:
            raise ProtocolFailure(f.COMPRESSION_ERROR, f"bad header block: {exc}") from None

    def _headers_complete(self, sid: int, flags: int, block: bytes) -> None:
        headers = self._decode(block)  # always: the HPACK table must stay in step
        end = bool(flags & f.END_STREAM)
        stream = self.streams.get(sid)
        if stream is not None:
            # Trailers: they must end the stream.
            if stream.remote_closed or not end:
                self._stream_error(stream, f.PROTOCOL_ERROR)
                return
            stream.remote_closed = True
            stream.receiver.on_data(_EMPTY, True)  # type: ignore[union-attr]
            if stream.local_closed:
                self.streams.pop(sid, None)
            return
        if sid & 1 == 0 or sid <= self.last_stream_id:
            raise ProtocolFailure(f.PROTOCOL_ERROR, f"invalid stream id {sid}")
        self.last_stream_id = sid
        if self.goaway_sent or len(self.streams) >= self.max_concurrent_streams:
            self.out.append(f.rst_stream_frame(sid, f.REFUSED_STREAM))
            return
        stream = Stream(sid, self.peer_initial_window)
        stream.remote_closed = end
        self.streams[sid] = stream
        stream.receiver = self.handler.stream_opened(stream, headers)
        if end and not stream.local_closed:
            stream.receiver.on_data(_EMPTY, True)
            if stream.local_closed:
                self.streams.pop(sid, None)
        elif end:
            self.streams.pop(sid, None)
