"""Connection timeouts checked by one coarse periodic sweep, never per request.

A server keeps one :class:`ConnectionSweep` over its set of connections. Every
``period`` seconds it calls each connection's ``sweep(now)``; the connection compares
what it is doing now (its phase, and a marker that changes whenever it makes progress)
with what it was doing at the last sweep, and closes itself once it has stayed put
longer than that phase allows. A request therefore costs nothing extra: the price is one
call per connection per period, and timeouts fire up to one period late.
"""

from __future__ import annotations

import asyncio
from collections.abc import Collection
from typing import Protocol


class Sweepable(Protocol):
    def sweep(self, now: float) -> None: ...


def sweep_period(*timeouts: float) -> float:
    """A period fine enough for the shortest enabled timeout (0 means disabled)."""
    enabled = [t for t in timeouts if t > 0]
    if not enabled:
        return 0.0
    return min(1.0, max(0.05, min(enabled) / 4))


class ConnectionSweep:
    """Calls ``sweep(now)`` on every connection of ``connections`` once per ``period``."""

    def __init__(self, connections: Collection[Sweepable], period: float) -> None:
        self._connections = connections
        self._period = period
        self._loop = asyncio.get_running_loop()
        self._handle: asyncio.TimerHandle | None = None
        if period > 0:
            self._handle = self._loop.call_later(period, self._tick)

    def _tick(self) -> None:
        now = self._loop.time()
        for connection in list(self._connections):
            connection.sweep(now)
        self._handle = self._loop.call_at(now + self._period, self._tick)

    def close(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None
