"""The control frames of the server's HTTP/2 connection (RFC 9113): SETTINGS, PING with
grpc's ping-abuse policy, GOAWAY, WINDOW_UPDATE, PRIORITY, RST_STREAM and PUSH_PROMISE,
and the stream error that resets one stream.

:class:`ControlFrames` sits between :class:`~.sending.H2Sender` and
:class:`~.connection.H2Connection`, which sets its state and dispatches frames to it.
"""

from __future__ import annotations

from collections.abc import Callable

from tritium.frontends.grpc.native import frames as f
from tritium.frontends.grpc.native.sending import H2Sender, Stream

#: A client that may not ping while idle may ping this often anyway (grpc's rule).
_IDLE_PING_INTERVAL = 7200.0


class ProtocolFailure(Exception):
    """A connection error: the peer broke the protocol."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


class ControlFrames(H2Sender):
    """Handlers of the connection-level frames; see the module docstring."""

    last_stream_id: int
    min_ping_interval: float
    max_ping_strikes: int
    permit_idle_pings: bool
    on_ping_ack: Callable[[bytes], None] | None
    _clock: Callable[[], float]

    def _on_priority(self, flags: int, sid: int, payload: memoryview) -> None:
        if sid == 0:
            raise ProtocolFailure(f.PROTOCOL_ERROR, "PRIORITY on stream 0")
        if len(payload) != 5:
            stream = self.streams.get(sid)
            if stream is not None:
                self._stream_error(stream, f.FRAME_SIZE_ERROR)
            else:
                self.out.append(f.rst_stream_frame(sid, f.FRAME_SIZE_ERROR))

    def _on_rst_stream(self, flags: int, sid: int, payload: memoryview) -> None:
        if sid == 0:
            raise ProtocolFailure(f.PROTOCOL_ERROR, "RST_STREAM on stream 0")
        if len(payload) != 4:
            raise ProtocolFailure(f.FRAME_SIZE_ERROR, "RST_STREAM payload must be 4 bytes")
        if sid > self.last_stream_id:
            raise ProtocolFailure(f.PROTOCOL_ERROR, f"RST_STREAM on idle stream {sid}")
        stream = self.streams.pop(sid, None)
        self._blocked.pop(sid, None)
        if stream is not None:
            stream.local_closed = stream.remote_closed = True
            stream.receiver.on_reset()  # type: ignore[union-attr]

    def _on_settings(self, flags: int, sid: int, payload: memoryview) -> None:
        if sid != 0:
            raise ProtocolFailure(f.PROTOCOL_ERROR, "SETTINGS on a stream")
        if flags & f.ACK:
            if len(payload):
                raise ProtocolFailure(f.FRAME_SIZE_ERROR, "SETTINGS ACK with a payload")
            return
        if len(payload) % 6:
            raise ProtocolFailure(f.FRAME_SIZE_ERROR, "SETTINGS payload not a multiple of 6")
        for key, value in f.parse_settings(payload):
            if key == f.SETTINGS_INITIAL_WINDOW_SIZE:
                if value > f.MAX_WINDOW:
                    raise ProtocolFailure(f.FLOW_CONTROL_ERROR, "initial window too large")
                delta = value - self.peer_initial_window
                self.peer_initial_window = value
                for stream in self.streams.values():
                    stream.send_window += delta
                    if stream.send_window > f.MAX_WINDOW:
                        raise ProtocolFailure(f.FLOW_CONTROL_ERROR, "stream window overflow")
            elif key == f.SETTINGS_MAX_FRAME_SIZE:
                if not f.DEFAULT_MAX_FRAME_SIZE <= value <= f.MAX_MAX_FRAME_SIZE:
                    raise ProtocolFailure(f.PROTOCOL_ERROR, "invalid SETTINGS_MAX_FRAME_SIZE")
                self.peer_max_frame = value
            elif key == f.SETTINGS_ENABLE_PUSH and value > 1:
                raise ProtocolFailure(f.PROTOCOL_ERROR, "invalid SETTINGS_ENABLE_PUSH")
            # HEADER_TABLE_SIZE needs nothing: responses never use the dynamic table.
        self.out.append(f.SETTINGS_ACK)
        self._flush_blocked()

    def _on_push_promise(self, flags: int, sid: int, payload: memoryview) -> None:
        raise ProtocolFailure(f.PROTOCOL_ERROR, "clients must not send PUSH_PROMISE")

    def _on_ping(self, flags: int, sid: int, payload: memoryview) -> None:
        if sid != 0:
            raise ProtocolFailure(f.PROTOCOL_ERROR, "PING on a stream")
        if len(payload) != 8:
            raise ProtocolFailure(f.FRAME_SIZE_ERROR, "PING payload must be 8 bytes")
        if flags & f.ACK:
            if self.on_ping_ack is not None:
                self.on_ping_ack(bytes(payload))
            return
        now = self._clock()
        if self._last_ping is not None:
            interval = (
                self.min_ping_interval
                if self.streams or self.permit_idle_pings
                else _IDLE_PING_INTERVAL
            )
            if now - self._last_ping < interval:
                self.ping_strikes += 1
                if self.max_ping_strikes and self.ping_strikes > self.max_ping_strikes:
                    self.out.append(f.ping_frame(bytes(payload), ack=True))
                    raise ProtocolFailure(f.ENHANCE_YOUR_CALM, "too_many_pings")
        self._last_ping = now
        self.out.append(f.ping_frame(bytes(payload), ack=True))

    def _on_goaway(self, flags: int, sid: int, payload: memoryview) -> None:
        if sid != 0:
            raise ProtocolFailure(f.PROTOCOL_ERROR, "GOAWAY on a stream")
        if len(payload) < 8:
            raise ProtocolFailure(f.FRAME_SIZE_ERROR, "GOAWAY payload too short")
        self.peer_goaway = True

    def _on_window_update(self, flags: int, sid: int, payload: memoryview) -> None:
        if len(payload) != 4:
            raise ProtocolFailure(f.FRAME_SIZE_ERROR, "WINDOW_UPDATE payload must be 4 bytes")
        increment = f.unpack_u32(payload) & 0x7FFFFFFF
        if sid == 0:
            if increment == 0:
                raise ProtocolFailure(f.PROTOCOL_ERROR, "WINDOW_UPDATE of 0")
            self.send_window += increment
            if self.send_window > f.MAX_WINDOW:
                raise ProtocolFailure(f.FLOW_CONTROL_ERROR, "connection window overflow")
            self._flush_blocked()
            return
        stream = self.streams.get(sid)
        if stream is None:
            if sid > self.last_stream_id:
                raise ProtocolFailure(f.PROTOCOL_ERROR, f"WINDOW_UPDATE on idle stream {sid}")
            return
        if increment == 0:
            self._stream_error(stream, f.PROTOCOL_ERROR)
            return
        stream.send_window += increment
        if stream.send_window > f.MAX_WINDOW:
            self._stream_error(stream, f.FLOW_CONTROL_ERROR)
            return
        if sid in self._blocked:
            self._flush_stream(stream)

    def _stream_error(self, stream: Stream, code: int) -> None:
        self.out.append(f.rst_stream_frame(stream.id, code))
        self.streams.pop(stream.id, None)
        self._blocked.pop(stream.id, None)
        stream.local_closed = stream.remote_closed = True
        if stream.receiver is not None:
            stream.receiver.on_reset()
