"""Handing a whole HTTP request to its route and putting the answer (at once, deferred,
awaited or streamed) in its place in the connection's response order.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from functools import partial

from tritium.core.completion import Completion
from tritium.frontends.http.event_stream import EventStream
from tritium.frontends.http.messages import (
    METHOD_NOT_ALLOWED,
    NOT_FOUND,
    DeferredResponse,
    HttpRequest,
    HttpResponse,
    error_response,
)
from tritium.frontends.http.response_writing import ResponseWriting, Slot
from tritium.frontends.http.router import Router

logger = logging.getLogger("tritium.frontends.http")


class RequestHandling(ResponseWriting):
    """Routes requests and collects their answers; see the module docstring."""

    _router: Router
    _loop: asyncio.AbstractEventLoop
    _debug: bool

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
        slot = Slot(keep_alive, http10)
        queue = self._queue
        queue.append(slot)
        self._dispatch(slot, method, path, query, headers, body)
        # A deferred response settled at once (a response-cache hit) was flushed already.
        if slot.response is not None and queue and queue[0] is slot:
            self._flush()
        elif len(queue) >= self._max_pipeline:
            self._update_reading()

    def _dispatch(
        self,
        slot: Slot,
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
            slot.label = f"{method} {path}"  # logged with its status when answered

    async def _complete(self, slot: Slot, pending: Awaitable[HttpResponse]) -> None:
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
        self,
        slot: Slot,
        finish: Callable[[Completion], HttpResponse | Awaitable[HttpResponse]],
        done: Completion,
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

    def _fail(self, response: HttpResponse) -> None:
        """Answer a request that cannot be read, after the ones before it, then close."""
        self._stop_parsing = True
        slot = Slot(False, False)
        slot.response = response
        self._queue.append(slot)
        if self._queue[0] is slot:
            self._flush()
