"""Runs model coroutines (``async def execute/initialize/finalize``) as Triton's stub
does: on one asyncio event loop in a background thread of the worker, started on first
use. An ordinary model's coroutine is awaited before the worker answers; a decoupled
model's runs on in the background, so the next batch can start while it streams.
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
        return self.submit(coro).result()

    def stop(self, timeout: float = 5.0) -> None:
        loop, thread = self._loop, self._thread
        self._loop = self._thread = None
        if loop is None or thread is None:
            return
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout)
        if not thread.is_alive():
            loop.close()
