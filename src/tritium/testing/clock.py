"""A monotonic clock that a test moves by hand, for the schedulers' and metrics' pure parts.

Code under test takes its clock as a ``Callable[[], int]`` returning monotonic nanoseconds
(``time.monotonic_ns`` in the server); a test passes a :class:`FakeClock` instead and sets
``now``, so deadlines and ages are exact and nothing sleeps.
"""

from __future__ import annotations


class FakeClock:
    """Returns ``now`` (nanoseconds) when called; the test sets or advances it."""

    def __init__(self, now: int = 0) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now
