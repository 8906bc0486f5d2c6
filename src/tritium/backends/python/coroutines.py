"""Runs model coroutines (``async def execute/initialize/finalize``).

A decoupled model's run on one asyncio event loop in a background thread of the worker,
started on first use, as Triton's stub does, so the next batch can start while one
streams. An ordinary model's coroutine is awaited before the worker answers, so it runs to
completion on an event loop of the worker's own thread (``inline``): no hand-over between
threads per batch, which would cost an ``async def execute`` throughput against a plain
one. A model whose ``execute`` is a coroutine function has the worker's whole message loop
run as one task on that loop (``serve``), which awaits each ``execute`` like any other
coroutine: no loop started and stopped per batch. Tasks such a model leaves running go on
whenever the loop runs: while a coroutine of the model is awaited.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine
from concurrent.futures import Future
from typing import Any


class CoroutineRunner:
    def __init__(self) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        #: Run :meth:`run`'s coroutines on the calling thread (ordinary models).
        self.inline = False
        self._inline_loop: asyncio.AbstractEventLoop | None = None
        #: A coroutine of the caller's runs on the inline loop (see :meth:`serve`): the
        #: model's coroutines are to be awaited, not run.
        self.serving = False

    def _ensure_loop(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None:
                loop = asyncio.new_event_loop()
                thread = threading.Thread(
                    target=loop.run_forever, name="model-event-loop", daemon=True
                )
                thread.start()
                self._loop, self._thread = loop, thread
            return self._loop

    def submit(self, coro: Coroutine[Any, Any, Any]) -> Future:
        """Schedule ``coro`` on the background loop; its result arrives in the future."""
        return asyncio.run_coroutine_threadsafe(coro, self._ensure_loop())

    def run(self, coro: Coroutine[Any, Any, Any]) -> Any:
        """Run ``coro`` to completion and return its result (or raise its exception)."""
        if self.inline:
            return self._inline().run_until_complete(coro)
        return self.submit(coro).result()

    def serve(self, coro: Coroutine[Any, Any, Any]) -> Any:
        """Run ``coro`` on the inline loop, with :attr:`serving` set meanwhile."""
        self.serving = True
        try:
            return self._inline().run_until_complete(coro)
        finally:
            self.serving = False

    def _inline(self) -> asyncio.AbstractEventLoop:
        loop = self._inline_loop
        if loop is None:
            loop = self._inline_loop = asyncio.new_event_loop()
        return loop

    def stop(self, timeout: float = 5.0) -> None:
        inline, self._inline_loop = self._inline_loop, None
        if inline is not None:
            for task in asyncio.all_tasks(inline):
                task.cancel()
            inline.close()
        loop, thread = self._loop, self._thread
        self._loop = self._thread = None
        if loop is None or thread is None:
            return
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout)
        if not thread.is_alive():
            loop.close()
