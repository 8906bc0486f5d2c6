"""Garbage-collector settings for long-running processes (the server and its workers).

Everything allocated at start-up — modules, configurations, loaded models — lives as long
as the process, so it is moved out of the cyclic collector's view (``gc.freeze``): full
collections then walk only what serving allocated. Serving allocates a few dozen
container objects per request, nearly all freed by reference counting; with Python's
default young-generation threshold (700) the collector would run every few dozen
requests only to walk the objects of the requests in flight. A larger threshold keeps
that work rare; cyclic garbage is still collected, just in larger steps.
"""

from __future__ import annotations

import gc

#: Net container allocations between young-generation collections (Python's default: 700).
YOUNG_THRESHOLD = 20_000


def settle_heap() -> None:
    """Collect once, freeze what survives, and space out young collections."""
    gc.collect()
    gc.freeze()
    _, middle, old = gc.get_threshold()
    gc.set_threshold(YOUNG_THRESHOLD, middle, old)
