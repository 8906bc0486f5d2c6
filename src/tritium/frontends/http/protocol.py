"""HTTP/1.1 connections on an ``asyncio.Protocol`` with the httptools parser.

One protocol object per connection. Requests are parsed as bytes arrive, routed, and
handled; synchronous handlers answer at once, coroutine handlers run as tasks. A read
that repeats the connection's last request head with a body of the same length skips the
parser (see ``request_heads``), and one its route can answer at once (a response-cache
replay) is answered without queueing when nothing is waiting before it.
Pipelined requests are answered strictly in request order whatever order their
handlers finish in. Reading pauses while too many requests are queued or while the
transport's write buffer is full, and resumes when both drain. Each response is one
``transport.write``.

The connection is one class built in layers, each in its own module:
``response_writing`` (answers in order, streamed bodies, read pausing, closing) under
``request_handling`` (routing a whole request, collecting its answer) under
``request_reading`` (the parser callbacks and size limits); this module adds the
connection's life cycle, the reads (big ones parsed a slice at a time, repeated heads
answered without the parser) and the timeout sweep.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque

import httptools

from tritium.core.write_burst import WRITES
from tritium.frontends.http.messages import error_response
from tritium.frontends.http.request_heads import RequestHead, planned_head
from tritium.frontends.http.request_reading import RequestReading
from tritium.frontends.http.router import Router
from tritium.frontends.http.timeouts import HttpTimeouts

logger = logging.getLogger("tritium.frontends.http")

DEFAULT_MAX_PIPELINE = 32
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


class HttpProtocol(RequestReading):
    """One HTTP/1.1 connection; see the module docstring."""

    def __init__(
        self,
        router: Router,
        connections: set[HttpProtocol],
        *,
        max_input_size: int,
        max_pipeline: int = DEFAULT_MAX_PIPELINE,
        timeouts: HttpTimeouts = _DEFAULT_TIMEOUTS,
        close_after_response: bool = False,
    ) -> None:
        self._router = router
        self._timeouts = timeouts
        self._connections = connections
        self._max_input_size = max_input_size
        self._max_pipeline = max_pipeline
        self._loop = asyncio.get_running_loop()
        self._parser = httptools.HttpRequestParser(self)
        self._transport = None
        self._queue = deque()
        self._debug = logger.isEnabledFor(logging.DEBUG)
        # per-request parse state
        self._url = b""
        self._headers = {}
        self._raw_headers = []
        self._header_bytes = 0
        self._body = []
        self._body_size = 0
        self._too_large = False
        self._in_message = False
        # repeated heads: the last one read twice in a row, and the one before
        self._head: RequestHead | None = None
        self._candidate = b""
        self._refused = b""
        self._completed = 0
        self._plannable = None
        # connection state
        self._stop_parsing = False
        self._draining = close_after_response
        self._write_paused = False
        self._read_paused = False
        self.closed: asyncio.Future[None] = self._loop.create_future()
        # timeouts: reads so far, and the phase and progress marker of the last sweep
        self._reads = 0
        self._swept_phase = _BUSY
        self._swept_key: object = None
        self._swept_at = 0.0
        # the unparsed rest of a big read (see ``_FEED_SLICE``); reading pauses meanwhile
        self._backlog = None
        self._full_read = False  # a full read was parsed in this loop iteration

    # ---------------------------------------------------------------- transport

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport  # type: ignore[assignment]
        self._connections.add(self)
        if self._debug:
            logger.debug("HTTP connection from %s opened", transport.get_extra_info("peername"))

    def connection_lost(self, exc: Exception | None) -> None:
        self._connections.discard(self)
        if self._debug:
            peer = self._transport.get_extra_info("peername") if self._transport else None
            logger.debug("HTTP connection from %s closed", peer)
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
                body = data[len(head.raw) :]
                quick = head.quick
                if quick is not None and not self._queue:
                    answer = quick(head.params, head.headers, body)
                    if answer is not None:
                        WRITES.write(self._transport.write, answer)  # type: ignore[union-attr]
                        return
                self._answer(True, head.method, head.path, head.query, head.headers, body)
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
        head = self._head = planned_head(raw, self._body_size, *found, self._headers)
        if head is None:
            self._refused = raw
        elif not self._debug:  # a quick answer is not logged: debug logs take the full path
            route = self._router.match(head.method, head.path)
            head.quick, head.params = route.quick, route.params
        self._candidate = b""

    def close_after_response(self) -> None:
        """Answer the next request with ``Connection: close`` and close after it, so the
        client reconnects (through its load balancer) instead of keeping this one."""
        self._draining = True

    def begin_drain(self) -> None:
        """Finish the requests already received, then close; read no new ones."""
        self._draining = True
        if not self._in_message:
            self._stop_parsing = True
        self._close_if_idle()

    def sweep(self, now: float) -> None:
        """Close the connection if it has stayed in one phase longer than its timeout
        allows (see ``timeouts``); called by the server's periodic sweep."""
        if self._queue or self._stop_parsing or self._transport is None:
            self._swept_phase = _BUSY
            return
        timeouts = self._timeouts
        key: object  # a count, or the head's header list (compared by identity)
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
