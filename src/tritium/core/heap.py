"""Garbage-collector settings for long-running processes (the server and its workers).

Everything allocated at start-up — modules, configurations, loaded models — lives as long
as the process, so it is moved out of the cyclic collector's view (``gc.freeze``): full
collections then walk only what serving allocated. Serving allocates a few dozen
container objects per request, nearly all freed by reference counting; with Python's
default young-generation threshold (700) the collector would run every few dozen
requests only to walk the objects of the requests in flight. A larger threshold keeps
that work rare; cyclic garbage is still collected, just in larger steps.

What serving releases for good — a retired model version, a reaped or replaced worker
process — is often frozen (it was loaded at start-up) or old enough that the collector
would not look at it again for a long time, and such graphs hold cycles. Whoever releases
one calls ``collect_released``: one full collection, frozen objects included, follows
shortly after.
"""

from __future__ import annotations

import asyncio
import gc

#: Net container allocations between young-generation collections (Python's default: 700).
YOUNG_THRESHOLD = 20_000

#: Seconds from a release to its collection. Releases come in bursts (every instance of a
#: version, a worker and its arenas); one collection serves the whole burst.
RELEASE_DELAY_S = 0.5


def settle_heap() -> None:
    """Collect once, freeze what survives, and space out young collections."""
    gc.collect()
    gc.freeze()
    _, middle, old = gc.get_threshold()
    gc.set_threshold(YOUNG_THRESHOLD, middle, old)


def collect_now() -> None:
    """A full collection that also looks at frozen objects; what survives is frozen again."""
    frozen = gc.get_freeze_count() > 0
    if frozen:
        gc.unfreeze()
    gc.collect()
    if frozen:
        gc.freeze()


class _ReleaseCollection:
    """At most one pending collection per event loop; outside a loop, collect at once."""

    def __init__(self) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None
        self._handle: asyncio.TimerHandle | None = None

    def request(self) -> None:
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            collect_now()
            return
        if self._handle is not None and self._loop is loop and not loop.is_closed():
            return
        self._loop = loop
        self._handle = loop.call_later(RELEASE_DELAY_S, self._run)

    def _run(self) -> None:
        self._loop = self._handle = None
        collect_now()


_release = _ReleaseCollection()


def collect_released() -> None:
    """Something long-lived was just released: collect it ``RELEASE_DELAY_S`` from now."""
    _release.request()
