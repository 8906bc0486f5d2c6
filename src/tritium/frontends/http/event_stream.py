"""A response whose body is written as it is produced: Server-Sent Events in chunks.

A handler returns an :class:`EventStream` and keeps feeding it (``send``, then ``end``);
the connection writes the head once the stream is first in its response order, then each
chunk at once. Until then chunks wait in the stream, bounded like the connection's own
buffer. When the client goes away, or reads so slowly that more than
:data:`MAX_UNSENT_BYTES` pile up on our side, the stream is cancelled: ``on_cancel`` runs
(the handler abandons the work) and nothing more is written.
"""

from __future__ import annotations

from collections.abc import Callable

#: Response bytes a stream may have waiting (in itself or in the socket's write buffer)
#: before it is cut off, so a reader that stalls cannot grow the server's memory.
MAX_UNSENT_BYTES = 8 << 20

CONTENT_EVENT_STREAM = b"text/event-stream; charset=utf-8"


class EventStream:
    __slots__ = (
        "status",
        "content_type",
        "_buffer",
        "_buffered",
        "_write",
        "_on_end",
        "ended",
        "closed",
        "on_cancel",
        "on_abort",
    )

    def __init__(self, status: int = 200, content_type: bytes = CONTENT_EVENT_STREAM) -> None:
        self.status = status
        self.content_type = content_type
        self._buffer: list[bytes] = []
        self._buffered = 0
        #: The connection's writer once the head is out: returns False when the client
        #: is too far behind.
        self._write: Callable[[bytes], bool] | None = None
        self._on_end: Callable[[], None] | None = None
        self.ended = False
        self.closed = False
        #: Called once when the stream is cancelled (client gone or too slow): the
        #: handler's (abandon the work), then the connection's (drop the connection,
        #: since the status line promised a body that will not be finished).
        self.on_cancel: Callable[[], None] | None = None
        self.on_abort: Callable[[], None] | None = None

    @property
    def started(self) -> bool:
        """The head is written and chunks go straight to the connection."""
        return self._write is not None

    def send(self, data: bytes) -> None:
        if self.closed or self.ended or not data:
            return
        write = self._write
        if write is None:
            self._buffer.append(data)
            self._buffered += len(data)
            if self._buffered > MAX_UNSENT_BYTES:
                self.cancel()
        elif not write(data):
            self.cancel()

    def end(self) -> None:
        if self.ended:
            return
        self.ended = True
        if self._on_end is not None and not self.closed:
            self._on_end()

    def attach(self, write: Callable[[bytes], bool], on_end: Callable[[], None]) -> None:
        """The connection is ready: write what waited, then every chunk as it comes."""
        buffered, self._buffer = self._buffer, []
        self._buffered = 0
        for data in buffered:
            if not write(data):
                self.cancel()
                return
        self._write = write
        self._on_end = on_end

    def cancel(self) -> None:
        if self.closed:
            return
        self.closed = True
        self._buffer = []
        for callback in (self.on_cancel, self.on_abort):
            if callback is not None:
                callback()
        self.on_cancel = self.on_abort = None
