"""Writing an HTTP/1.1 connection's answers in request order: whole responses, streamed
bodies, pausing reads while too much is queued, and closing when the last answer is out.

:class:`ResponseWriting` is the lowest layer of
:class:`~tritium.frontends.http.protocol.HttpProtocol`; its state is set by the
protocol's constructor.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from functools import partial

from tritium.core.completion import Completion
from tritium.core.write_burst import WRITES
from tritium.frontends.http.event_stream import MAX_UNSENT_BYTES, EventStream
from tritium.frontends.http.messages import HttpResponse
from tritium.frontends.http.response_bytes import response_bytes
from tritium.frontends.http.status import status_line

logger = logging.getLogger("tritium.frontends.http")


class Slot:
    """One request's place in the connection's response order."""

    __slots__ = ("keep_alive", "http10", "response", "task", "pending", "stream", "label")

    def __init__(self, keep_alive: bool, http10: bool) -> None:
        self.keep_alive = keep_alive
        self.http10 = http10
        self.response: HttpResponse | None = None
        self.task: asyncio.Task | None = None
        self.pending: Completion | None = None
        #: A body written as it is produced; ``response`` then holds its head.
        self.stream: EventStream | None = None
        #: "METHOD path", kept only for --log-verbose's request line.
        self.label: str | None = None


class ResponseWriting(asyncio.Protocol):
    """The queue of answers and the transport they are written to."""

    _transport: asyncio.Transport | None
    _queue: deque[Slot]
    _max_pipeline: int
    _in_message: bool
    _stop_parsing: bool
    _write_paused: bool
    _read_paused: bool
    _backlog: bytes | None
    _debug: bool

    def abort(self) -> None:
        if self._transport is not None:
            self._transport.abort()

    def _flush(self) -> None:
        queue = self._queue
        while queue and queue[0].response is not None:
            stream = queue[0].stream
            if stream is not None and not self._stream_finished(queue[0], stream):
                break  # the rest waits until this body is complete
            if not self._write(queue.popleft()):
                WRITES.flush()  # queued answers are written before the close
                self._transport.close()  # type: ignore[union-attr]
                return
        # A shorter queue can only end a pause, and only a stopped parser closes.
        if self._read_paused:
            self._update_reading()
        if self._stop_parsing:
            self._close_if_idle()

    def _write(self, slot: Slot) -> bool:
        """Write one response; False when the connection must close after it."""
        response = slot.response
        assert response is not None
        keep = slot.keep_alive and not response.close
        if keep and self._stop_parsing and not self._queue and not self._in_message:
            keep = False  # the last answer this connection will give
        if slot.stream is not None:
            if slot.stream.closed:
                return False  # cut off: the body is incomplete, only closing says so
            if not slot.http10:
                WRITES.flush()  # what was queued before it goes first
                self._transport.write(b"0\r\n\r\n")  # type: ignore[union-attr]
            return keep
        if self._debug:
            logger.debug("HTTP request: %s: %d", slot.label, response.status)
        data = response_bytes(response, keep, slot.http10)
        if keep:
            # Written once the batch it answers has been handed out (see write_burst).
            WRITES.write(self._transport.write, data)  # type: ignore[union-attr]
        else:
            WRITES.flush()  # the connection closes after it: nothing may be left queued
            self._transport.write(data)  # type: ignore[union-attr]
        return keep

    # ------------------------------------------------------------- streaming

    def _stream_finished(self, slot: Slot, stream: EventStream) -> bool:
        """Start ``slot``'s streamed body if it has not started; True once it ended."""
        if stream.closed:
            return True
        if not stream.started:
            head = slot.response
            assert head is not None and self._transport is not None
            chunked = not slot.http10
            parts = [status_line(head.status, slot.http10)]
            if head.content_type is not None:
                parts.append(b"Content-Type: " + head.content_type + b"\r\n")
            parts.append(
                b"Transfer-Encoding: chunked\r\n\r\n" if chunked else b"Connection: close\r\n\r\n"
            )
            if not chunked:
                slot.keep_alive = False
            WRITES.flush()  # what was queued before it goes first
            self._transport.write(b"".join(parts))
            stream.attach(partial(self._stream_write, chunked), partial(self._stream_ended, slot))
        return stream.ended or stream.closed

    def _stream_write(self, chunked: bool, data: bytes) -> bool:
        transport = self._transport
        if transport is None or transport.is_closing():
            return False
        WRITES.flush()  # what was queued before it goes first
        transport.write(b"%x\r\n%b\r\n" % (len(data), data) if chunked else data)
        return transport.get_write_buffer_size() <= MAX_UNSENT_BYTES

    def _stream_ended(self, slot: Slot) -> None:
        if self._queue and self._queue[0] is slot:
            self._flush()

    # ------------------------------------------------------ reading and closing

    def _update_reading(self) -> None:
        transport = self._transport
        if transport is None or transport.is_closing():
            return
        pause = (
            self._write_paused
            or len(self._queue) >= self._max_pipeline
            or self._backlog is not None
        )
        if pause != self._read_paused:
            self._read_paused = pause
            if pause:
                transport.pause_reading()
            else:
                transport.resume_reading()

    def _close_if_idle(self) -> None:
        if (
            self._stop_parsing
            and not self._queue
            and not self._in_message
            and self._transport is not None
        ):
            WRITES.flush()  # queued answers are written before the close
            self._transport.close()
