"""What a scheduler drives: an instance that runs one batch at a time."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Protocol

from tritium.core import InferRequest, InferResponse


class Runner(Protocol):
    name: str

    @property
    def running(self) -> bool:
        """False while the instance is down (crashed, restarting)."""
        ...

    def submit(self, batch: list[InferRequest]) -> asyncio.Future[list[InferResponse]]:
        """Start ``batch`` at once; the future gets one response per request."""
        ...

    def cancel(self, request: InferRequest) -> None:
        """Tell the running batch that ``request``'s client has gone away."""
        ...

    def when_ready(self, callback: Callable[[], None]) -> None:
        """Call back once the runner can take a batch again."""
        ...

    def on_restart_failure(self, callback: Callable[[], None]) -> None: ...
