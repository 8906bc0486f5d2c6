"""The sending half of the server's HTTP/2 connection: header blocks, DATA within the
peer's flow-control windows (queued per stream while a window is closed), trailers after
the queued data, whole small responses in one buffer, and resets from our side.

:class:`H2Sender` holds no receiving logic; :class:`~.connection.H2Connection` extends it
(through :class:`~.control_frames.ControlFrames`) and calls :meth:`H2Sender._flush_blocked`
when the peer opens its windows.
"""

from __future__ import annotations

import struct
from typing import Any

from tritium.frontends.grpc.native import frames as f

_HEADER = f.HEADER
#: A DATA frame header followed by a gRPC message prefix (compressed flag, length).
_DATA_MESSAGE = struct.Struct(">HBBBLBL")
_MESSAGE_PREFIX = struct.Struct(">BL")  # a gRPC message's compressed flag and length
_END_TRAILERS = f.END_HEADERS | f.END_STREAM

#: Response bytes a stream may have queued behind a closed flow-control window before
#: another message is refused (one message of any allowed size is always accepted).
MAX_QUEUED_BYTES = 64 << 20
#: Once a stream's queued DATA sent in one go is this big, the connection's output is
#: written as it lies (views of the response), not copied into one buffer first.
_BIG_OUT = 256 * 1024


class Stream:
    """One stream's flow-control windows, half-close state and queued output."""

    __slots__ = (
        "id",
        "receiver",
        "send_window",
        "recv_consumed",
        "remote_closed",
        "local_closed",
        "pending",
        "queued",
        "trailers",
    )

    def __init__(self, stream_id: int, send_window: int) -> None:
        self.id = stream_id
        self.receiver: Any = None  # the connection's StreamReceiver
        self.send_window = send_window
        self.recv_consumed = 0
        self.remote_closed = False
        self.local_closed = False
        #: Response bytes waiting for window, then trailers (a header block) to end with.
        self.pending: list[memoryview] = []
        #: Bytes in ``pending``.
        self.queued = 0
        self.trailers: bytes | None = None


class H2Sender:
    """Output state of one connection; see the module docstring."""

    def __init__(self) -> None:
        self.out: list[bytes | memoryview] = []
        #: True once ``out`` holds much queued DATA: write ``out`` as it is then
        #: (:meth:`take_output`), not joined by :meth:`data_to_send`.
        self.out_big = False
        self.streams: dict[int, Stream] = {}
        # What the peer allows us.
        self.peer_initial_window = f.DEFAULT_WINDOW
        self.peer_max_frame = f.DEFAULT_MAX_FRAME_SIZE
        self.send_window = f.DEFAULT_WINDOW
        self._blocked: dict[int, Stream] = {}
        # Sending resets the ping-abuse policy (grpc's rule: pings after data are fine).
        self._last_ping: float | None = None
        self.ping_strikes = 0

    def data_to_send(self) -> bytes:
        out = self.out
        if not out:
            return b""
        data = out[0] if len(out) == 1 else b"".join(out)
        out.clear()
        self.out_big = False
        return data  # type: ignore[return-value]

    def take_output(self) -> list[bytes | memoryview]:
        """What :meth:`data_to_send` joins, as it is (for a transport's ``writelines``)."""
        out, self.out = self.out, []
        self.out_big = False
        return out

    # ------------------------------------------------------------------ send

    def send_headers(self, stream: Stream, block: bytes, end_stream: bool = False) -> None:
        """A header block (leading headers, or trailers-only when ``end_stream``)."""
        if stream.local_closed:
            return
        self._last_ping = None
        self.ping_strikes = 0
        self.out.append(f.headers_frames(stream.id, block, end_stream, self.peer_max_frame))
        if end_stream:
            self._end_local(stream)

    def send_data(self, stream: Stream, data: bytes | memoryview) -> None:
        """Response bytes, sent as the flow-control windows allow."""
        if stream.local_closed or not len(data):
            return
        self._last_ping = None
        self.ping_strikes = 0
        stream.pending.append(memoryview(data))
        stream.queued += len(data)
        self._flush_stream(stream)

    def send_trailers(self, stream: Stream, block: bytes) -> None:
        """End the stream with ``block`` once its queued data has been sent."""
        if stream.local_closed:
            return
        if stream.pending:
            stream.trailers = block
        else:
            self.send_headers(stream, block, end_stream=True)

    def send_response(
        self, stream: Stream, head: bytes, prefix: bytes, message: bytes, trailers: bytes
    ) -> None:
        """A whole response (headers, one DATA of ``prefix + message``, trailers) — in
        one buffer when the windows allow, which they do for all but large messages."""
        if stream.local_closed:
            return
        size = len(prefix) + len(message)
        tsize = len(trailers)
        if (
            size <= self.peer_max_frame
            and tsize <= self.peer_max_frame
            and size <= stream.send_window
            and size <= self.send_window
            and not stream.pending
        ):
            self._last_ping = None
            self.ping_strikes = 0
            sid = stream.id
            stream.send_window -= size
            self.send_window -= size
            self.out.append(
                b"".join(
                    (
                        _HEADER.pack(
                            len(head) >> 8, len(head) & 0xFF, f.HEADERS, f.END_HEADERS, sid
                        ),
                        head,
                        _HEADER.pack(size >> 8, size & 0xFF, f.DATA, 0, sid),
                        prefix,
                        message,
                        _HEADER.pack(tsize >> 8, tsize & 0xFF, f.HEADERS, _END_TRAILERS, sid),
                        trailers,
                    )
                )
            )
            self._end_local(stream)
            return
        self.send_response_parts(stream, head, [prefix, message], trailers)

    def send_response_parts(
        self, stream: Stream, head: bytes, parts: list[Any], trailers: bytes
    ) -> None:
        """A whole response whose DATA is ``parts`` in order, each framed where it lies
        (views of a big response are never joined into one buffer)."""
        self.send_headers(stream, head)
        for part in parts:
            self.send_data(stream, part)
        self.send_trailers(stream, trailers)

    def send_message_parts(self, stream: Stream, parts: list[Any]) -> bool:
        """:meth:`send_message` of an uncompressed message given as its parts in order,
        each queued where it lies (a big message is never joined)."""
        if stream.local_closed:
            return True
        if stream.queued >= MAX_QUEUED_BYTES:
            self.reset_stream(stream, f.ENHANCE_YOUR_CALM)
            return False
        self.send_data(stream, _MESSAGE_PREFIX.pack(0, sum(map(len, parts))))
        for part in parts:
            self.send_data(stream, part)
        return True

    def send_message(self, stream: Stream, flag: int, message: bytes) -> bool:
        """One gRPC message (``flag`` and length prefix, then ``message``) as DATA: one
        frame appended at once when the windows allow and nothing is queued before it.

        False when the stream already has :data:`MAX_QUEUED_BYTES` waiting for the
        client to open its window: the stream is then reset (ENHANCE_YOUR_CALM) and
        the message dropped, so a client that does not read cannot grow our memory.
        """
        if stream.local_closed:
            return True
        size = len(message) + 5
        if (
            size <= self.peer_max_frame
            and size <= stream.send_window
            and size <= self.send_window
            and not stream.pending
        ):
            self._last_ping = None
            self.ping_strikes = 0
            stream.send_window -= size
            self.send_window -= size
            out = self.out
            out.append(
                _DATA_MESSAGE.pack(size >> 8, size & 0xFF, f.DATA, 0, stream.id, flag, size - 5)
            )
            out.append(message)
            return True
        if stream.queued >= MAX_QUEUED_BYTES:
            self.reset_stream(stream, f.ENHANCE_YOUR_CALM)
            return False
        self.send_data(stream, _DATA_MESSAGE.pack(0, 0, 0, 0, 0, flag, size - 5)[9:] + message)
        return True

    def reset_stream(self, stream: Stream, code: int = f.CANCEL) -> None:
        """Abandon a stream from our side (the receiver is not told)."""
        if stream.id in self.streams:
            self.out.append(f.rst_stream_frame(stream.id, code))
            self.streams.pop(stream.id, None)
            self._blocked.pop(stream.id, None)
        stream.local_closed = stream.remote_closed = True
        stream.pending.clear()
        stream.queued = 0
        stream.trailers = None

    def _end_local(self, stream: Stream) -> None:
        stream.local_closed = True
        self._blocked.pop(stream.id, None)
        if stream.remote_closed:
            self.streams.pop(stream.id, None)
        elif stream.id in self.streams:
            # The answer is complete while the client is still sending: tell it to stop.
            self.out.append(f.rst_stream_frame(stream.id, f.NO_ERROR))
            self.streams.pop(stream.id, None)
            stream.remote_closed = True

    def _flush_stream(self, stream: Stream) -> None:
        pending = stream.pending
        out = self.out
        max_frame = self.peer_max_frame
        sid = stream.id
        sent = 0
        while pending:
            allowed = min(stream.send_window, self.send_window, max_frame)
            if allowed <= 0:
                if sent >= _BIG_OUT:
                    self.out_big = True
                self._blocked[sid] = stream
                return
            chunk = pending[0]
            if len(chunk) <= allowed:
                pending.pop(0)
            else:
                chunk, pending[0] = chunk[:allowed], chunk[allowed:]
            size = len(chunk)
            stream.queued -= size
            stream.send_window -= size
            self.send_window -= size
            out.append(f.frame_header(size, f.DATA, 0, sid))
            out.append(chunk)
            sent += size
        if sent >= _BIG_OUT:
            self.out_big = True
        self._blocked.pop(sid, None)
        if stream.trailers is not None:
            block, stream.trailers = stream.trailers, None
            self.send_headers(stream, block, end_stream=True)

    def _flush_blocked(self) -> None:
        for stream in list(self._blocked.values()):
            if self.send_window <= 0:
                return
            self._flush_stream(stream)
