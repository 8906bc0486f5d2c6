"""HTTP/1.1 connections on an ``asyncio.Protocol`` with the httptools parser.

One protocol object per connection. Requests are parsed as bytes arrive, routed, and
handled; synchronous handlers answer at once, coroutine handlers run as tasks. A read
that repeats the connection's last request head with a body of the same length skips the
parser (see ``request_heads``).
Pipelined requests are answered strictly in request order whatever order their
handlers finish in. Reading pauses while too many requests are queued or while the
transport's write buffer is full, and resumes when both drain. Each response is one
``transport.write``.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Awaitable, Callable
from functools import partial

import httptools

from tritium.core.completion import Completion
from tritium.core.write_burst import WRITES
from tritium.frontends.http.compression import too_large_message
from tritium.frontends.http.event_stream import MAX_UNSENT_BYTES, EventStream
from tritium.frontends.http.messages import (
    METHOD_NOT_ALLOWED,
    NOT_FOUND,
    DeferredResponse,
    HttpRequest,
    HttpResponse,
    error_response,
)
from tritium.frontends.http.request_heads import RequestHead, planned_head
from tritium.frontends.http.response_bytes import response_bytes
from tritium.frontends.http.router import Router
from tritium.frontends.http.status import status_line
from tritium.frontends.http.timeouts import HttpTimeouts

logger = logging.getLogger("tritium.frontends.http")

MAX_HEADER_BYTES = 64 * 1024
DEFAULT_MAX_PIPELINE = 32
_CONTINUE = b"HTTP/1.1 100 Continue\r\n\r\n"
# Connection phases as the timeout sweep sees them.
_BUSY, _IDLE, _HEAD, _BODY = range(4)
_DEFAULT_TIMEOUTS = HttpTimeouts()
# A read bigger than this is parsed one slice per loop iteration: a body of a million
# one-byte chunks costs a parser callback per byte or so, and must not hold the loop. The
# event loop reads at most 256 KiB at a time, so ordinary reads (a 150 KB image request)
# are parsed whole, keeping their repeated-head fast path; at the densest chunking a
# slice this size parses in well under 50 ms.
_FEED_SLICE = 256 * 1024
# Reads at least this big count as a slice too: the event loop may hand a connection many
# full reads in one iteration (libuv reads up to 32 times while the socket has data; 1M
# one-byte chunks held the loop 140 ms that way), so only the first of them is parsed at
# once and the others wait for the next iterations.
_FULL_READ = 128 * 1024


class _Slot:
    """One request's place in the connection's response order."""

    __slots__ = ("keep_alive", "http10", "response", "task", "pending", "stream")

    def __init__(self, keep_alive: bool, http10: bool) -> None:
        self.keep_alive = keep_alive
        self.http10 = http10
        self.response: HttpResponse | None = None
        self.task: asyncio.Task | None = None
        self.pending: Completion | None = None
        #: A body written as it is produced; ``response`` then holds its head.
        self.stream: EventStream | None = None


class HttpProtocol(asyncio.Protocol):
    def __init__(
        self,
        router: Router,
        connections: set[HttpProtocol],
        *,
        max_input_size: int,
        max_pipeline: int = DEFAULT_MAX_PIPELINE,
        timeouts: HttpTimeouts = _DEFAULT_TIMEOUTS,
    ) -> None:
        self._router = router
        self._timeouts = timeouts
        self._connections = connections
        self._max_input_size = max_input_size
        self._max_pipeline = max_pipeline
        self._loop = asyncio.get_running_loop()
        self._parser = httptools.HttpRequestParser(self)
        self._transport: asyncio.Transport | None = None
        self._queue: deque[_Slot] = deque()
        self._debug = logger.isEnabledFor(logging.DEBUG)
        # per-request parse state
        self._url = b""
        self._headers: dict[str, str] = {}
        self._raw_headers: list[tuple[bytes, bytes]] = []
        self._header_bytes = 0
        self._body: list[bytes] = []
        self._body_size = 0
        self._too_large = False
        self._in_message = False
        # repeated heads: the last one read twice in a row, and the one before
        self._head: RequestHead | None = None
        self._candidate = b""
        self._refused = b""
        self._completed = 0
        self._plannable: tuple[str, str, str] | None = None
        # connection state
        self._stop_parsing = False
        self._draining = False
        self._write_paused = False
        self._read_paused = False
        self.closed: asyncio.Future[None] = self._loop.create_future()
        # timeouts: reads so far, and the phase and progress marker of the last sweep
        self._reads = 0
        self._swept_phase = _BUSY
        self._swept_key: object = None
        self._swept_at = 0.0
        # the unparsed rest of a big read (see ``_FEED_SLICE``); reading pauses meanwhile
        self._backlog: bytes | None = None
        self._full_read = False  # a full read was parsed in this loop iteration

    # ---------------------------------------------------------------- transport

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport  # type: ignore[assignment]
        self._connections.add(self)

    def connection_lost(self, exc: Exception | None) -> None:
        self._connections.discard(self)
        self._stop_parsing = True
        for slot in self._queue:
            if slot.task is not None:
                slot.task.cancel()  # nobody is left to read the answer
            if slot.pending is not None:
                slot.pending.cancel()
            if slot.stream is not None:
                slot.stream.cancel()
        self._queue.clear()
        if not self.closed.done():
            self.closed.set_result(None)

    def pause_writing(self) -> None:
        self._write_paused = True
        self._update_reading()

    def resume_writing(self) -> None:
        self._write_paused = False
        self._update_reading()

    def data_received(self, data: bytes) -> None:
        if self._stop_parsing:
            return
        self._reads += 1
        if len(data) >= _FULL_READ or self._backlog is not None:
            if self._full_read or self._backlog is not None or len(data) > _FEED_SLICE:
                self._feed_later(data)
                return
            self._full_read = True
            self._loop.call_soon(self._full_read_done)
        idle = not self._in_message
        head = self._head
        if idle and head is not None and len(data) == head.size and data.startswith(head.raw):
            if not self._draining:
                self._answer(
                    True, head.method, head.path, head.query, head.headers, data[len(head.raw) :]
                )
                return
        self._completed = 0
        if self._feed(data) and idle and self._completed == 1 and not self._in_message:
            self._remember_head(data)

    def _feed(self, data: bytes) -> bool:
        """Parse ``data``; False when parsing stopped on an error or an upgrade."""
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            # The request itself was handled; protocol upgrades are not offered.
            self._stop_parsing = True
            self._close_if_idle()
            return False
        except httptools.HttpParserError as exc:
            # Bytes after a request that closes the connection are ignored, not refused.
            if not self._stop_parsing:
                self._fail(error_response(400, f"malformed HTTP request: {exc}"))
            return False
        return True

    def _full_read_done(self) -> None:
        self._full_read = False

    def _feed_later(self, data: bytes) -> None:
        """Queue a big read to be parsed a slice per loop iteration, reading paused."""
        if self._backlog is None:
            self._backlog = data
            self._loop.call_soon(self._feed_slice)
            self._update_reading()
        else:
            self._backlog += data

    def _feed_slice(self) -> None:
        backlog = self._backlog
        if backlog is None or self._stop_parsing:
            self._backlog = None
            return
        piece, rest = backlog[:_FEED_SLICE], backlog[_FEED_SLICE:]
        self._backlog = rest or None
        self._completed = 0
        self._plannable = None
        self._feed(piece)
        if self._backlog is not None and not self._stop_parsing:
            self._loop.call_soon(self._feed_slice)
        else:
            self._backlog = None
            self._update_reading()

    def _remember_head(self, data: bytes) -> None:
        """Keep the head of a read that held exactly one request once it repeats."""
        found = self._plannable
        if found is None or self._stop_parsing:
            return
        raw = data[: len(data) - self._body_size]
        if raw != self._candidate:
            self._candidate = raw
            return
        if raw == self._refused:
            return  # a head that cannot be kept is not checked again
        self._head = planned_head(raw, self._body_size, *found, self._headers)
        if self._head is None:
            self._refused = raw
        self._candidate = b""

    def begin_drain(self) -> None:
        """Finish the requests already received, then close; read no new ones."""
        self._draining = True
        if not self._in_message:
            self._stop_parsing = True
        self._close_if_idle()

    def abort(self) -> None:
        if self._transport is not None:
            self._transport.abort()

    def sweep(self, now: float) -> None:
        """Close the connection if it has stayed in one phase longer than its timeout
        allows (see ``timeouts``); called by the server's periodic sweep."""
        if self._queue or self._stop_parsing or self._transport is None:
            self._swept_phase = _BUSY
            return
        timeouts = self._timeouts
        if not self._in_message:
            phase, key, limit = _IDLE, self._reads, timeouts.keep_alive
        elif not self._headers:
            # The same head as last time: dribbled bytes do not restart its clock.
            phase, key, limit = _HEAD, self._raw_headers, timeouts.header
        else:
            phase, key, limit = _BODY, self._reads, timeouts.body
        same = key is self._swept_key if phase == _HEAD else key == self._swept_key
        if phase != self._swept_phase or not same:
            self._swept_phase, self._swept_key, self._swept_at = phase, key, now
            return
        if not limit or now - self._swept_at < limit:
            return
        if phase == _IDLE:
            transport = self._transport
            if transport.get_write_buffer_size():
                transport.abort()  # a client that does not read its answers either
            else:
                transport.close()
            return
        self._in_message = False
        what = "request head" if phase == _HEAD else "request body"
        self._fail(error_response(408, f"timed out waiting for the {what}"))

    # ------------------------------------------------------------ parser events

    def on_message_begin(self) -> None:
        if self._stop_parsing:
            return
        self._in_message = True
        self._url = b""
        self._headers = {}
        self._raw_headers = []
        self._header_bytes = 0
        self._body = []
        self._body_size = 0
        self._too_large = False

    def on_url(self, url: bytes) -> None:
        self._url += url
        self._header_bytes += len(url)
        if self._header_bytes > MAX_HEADER_BYTES and not self._stop_parsing:
            self._fail(error_response(400, "request header too large"))

    def on_header(self, name: bytes, value: bytes) -> None:
        size = self._header_bytes + len(name) + len(value)
        self._header_bytes = size
        if size > MAX_HEADER_BYTES:
            if not self._stop_parsing:
                self._fail(error_response(400, "request header too large"))
            return
        self._raw_headers.append((name, value))

    def on_headers_complete(self) -> None:
        if self._stop_parsing:
            return
        # Decoded once, here, rather than header by header in the parser callback.
        self._headers = {
            name.decode("latin-1").lower(): value.decode("latin-1")
            for name, value in self._raw_headers
        }
        length = self._headers.get("content-length")
        if length is not None and length.isdigit() and int(length) > self._max_input_size:
            self._too_large = True
        expect = self._headers.get("expect")
        if expect is not None and expect.lower() == "100-continue" and not self._queue:
            if self._too_large:
                # The client has not sent the body yet: refuse now, it never will.
                self._fail(self._too_large_response())
            else:
                self._transport.write(_CONTINUE)  # type: ignore[union-attr]

    def on_body(self, body: bytes) -> None:
        if self._too_large or self._stop_parsing:
            return  # drained and dropped, so the client still reads the answer
        self._body_size += len(body)
        if self._body_size > self._max_input_size:
            self._too_large = True
            self._body = []
        else:
            parts = self._body
            parts.append(body)
            if len(parts) > 256:
                # Many small chunks: gather them as they come, so the list stays short
                # and finishing the body is not one long join of a million pieces.
                gathered = parts[0] if type(parts[0]) is bytearray else bytearray(parts[0])
                gathered += b"".join(parts[1:])
                self._body = [gathered]

    def on_message_complete(self) -> None:
        self._in_message = False
        if self._stop_parsing:
            return
        parser = self._parser
        version = parser.get_http_version()
        http10 = version == "1.0"
        if not http10 and version != "1.1":
            # A request line without a version (HTTP/0.9) is not a request we answer.
            self._fail(error_response(400, "malformed HTTP request: no HTTP version"))
            return
        # An upgrade is never accepted, so nothing after such a request is HTTP/1.1.
        keep_alive = (
            parser.should_keep_alive() and not self._draining and not parser.should_upgrade()
        )
        self._completed += 1
        self._plannable = None
        if not keep_alive:
            self._stop_parsing = True
        if self._too_large:
            slot = _Slot(keep_alive, http10)
            self._queue.append(slot)
            slot.response = self._too_large_response()
            self._stop_parsing = True
            if self._queue[0] is slot:
                self._flush()
            return
        method = parser.get_method().decode("ascii", "replace")
        path, query = _split_url(self._url)
        if keep_alive and not http10:
            self._plannable = (method, path, query)
        body = self._body
        self._body = []
        self._answer(
            keep_alive,
            method,
            path,
            query,
            self._headers,
            (body[0] if type(body[0]) is bytes else bytes(body[0]))
            if len(body) == 1
            else b"".join(body),
            http10,
        )

    # ---------------------------------------------------------------- handling

    def _answer(
        self,
        keep_alive: bool,
        method: str,
        path: str,
        query: str,
        headers: dict[str, str],
        body: bytes,
        http10: bool = False,
    ) -> None:
        """Queue one whole request's slot, handle it, and write what is ready."""
        slot = _Slot(keep_alive, http10)
        queue = self._queue
        queue.append(slot)
        self._dispatch(slot, method, path, query, headers, body)
        if slot.response is not None and queue[0] is slot:
            self._flush()
        elif len(queue) >= self._max_pipeline:
            self._update_reading()

    def _dispatch(
        self,
        slot: _Slot,
        method: str,
        path: str,
        query: str,
        headers: dict[str, str],
        body: bytes,
    ) -> None:
        match = self._router.match(method, path)
        handler = match.handler
        if handler is None:
            slot.response = NOT_FOUND if match.status == 404 else METHOD_NOT_ALLOWED
            return
        request = HttpRequest(method, path, query, headers, body, slot.http10)
        try:
            result = handler(request, match.params)
        except Exception as exc:
            logger.error("unexpected error handling %s %s", method, path, exc_info=exc)
            result = error_response(500, "internal error")
        if isinstance(result, HttpResponse):
            slot.response = result
        elif isinstance(result, DeferredResponse):
            slot.pending = result.future
            result.future.add_done_callback(partial(self._deferred_done, slot, result.finish))
        elif isinstance(result, EventStream):
            slot.stream = result
            slot.response = HttpResponse(result.status, b"", result.content_type)
            result.on_abort = self.abort
        else:
            slot.task = self._loop.create_task(self._complete(slot, result))
        if self._debug:
            logger.debug("HTTP request: %s %s", method, path)

    async def _complete(self, slot: _Slot, pending: Awaitable[HttpResponse]) -> None:
        try:
            response = await pending
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            logger.error("unexpected error in an HTTP handler", exc_info=exc)
            response = error_response(500, "internal error")
        slot.task = None
        slot.response = response
        if self._queue and self._queue[0] is slot:
            self._flush()

    def _deferred_done(
        self, slot: _Slot, finish: Callable[[Completion], HttpResponse], done: Completion
    ) -> None:
        slot.pending = None
        if done.cancelled():
            return  # the connection is gone
        try:
            response = finish(done)
        except Exception as exc:
            logger.error("unexpected error in an HTTP handler", exc_info=exc)
            response = error_response(500, "internal error")
        if not isinstance(response, HttpResponse):
            # A big answer finished off the event loop (see ``offload``).
            slot.task = self._loop.create_task(self._complete(slot, response))
            return
        slot.response = response
        if self._queue and self._queue[0] is slot:
            self._flush()

    def _too_large_response(self) -> HttpResponse:
        size = self._headers.get("content-length")
        response = error_response(
            400, too_large_message(int(size) if size else None, self._max_input_size)
        )
        response.close = True
        return response

    def _fail(self, response: HttpResponse) -> None:
        """Answer a request that cannot be read, after the ones before it, then close."""
        self._stop_parsing = True
        slot = _Slot(False, False)
        slot.response = response
        self._queue.append(slot)
        if self._queue[0] is slot:
            self._flush()

    # ----------------------------------------------------------------- writing

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

    def _write(self, slot: _Slot) -> bool:
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
        data = response_bytes(response, keep, slot.http10)
        if keep:
            # Written once the batch it answers has been handed out (see write_burst).
            WRITES.write(self._transport.write, data)  # type: ignore[union-attr]
        else:
            WRITES.flush()  # the connection closes after it: nothing may be left queued
            self._transport.write(data)  # type: ignore[union-attr]
        return keep

    # ------------------------------------------------------------- streaming

    def _stream_finished(self, slot: _Slot, stream: EventStream) -> bool:
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

    def _stream_ended(self, slot: _Slot) -> None:
        if self._queue and self._queue[0] is slot:
            self._flush()

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


def _split_url(url: bytes) -> tuple[str, str]:
    """(decoded path, query) of a request target; absolute forms keep their path."""
    if not url.startswith(b"/"):
        try:
            parsed = httptools.parse_url(url)
            url = (parsed.path or b"/") + (b"?" + parsed.query if parsed.query else b"")
        except httptools.HttpParserInvalidURLError:
            url = b"/"
    path, _, query = url.partition(b"?")
    return path.partition(b"#")[0].decode("latin-1"), query.decode("latin-1")
