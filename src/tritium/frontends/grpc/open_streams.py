"""The open ModelStreamInfer calls of one grpc.aio endpoint, so that shutdown can end the
idle ones at once instead of waiting the whole grace period for clients that send nothing.

The native transport needs no such list: its connections hold their streams.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol


class PendingRequests(Protocol):
    """A stream's requests as :func:`end_when_idle` sees them (``InferStream`` is one)."""

    @property
    def pending(self) -> int: ...

    on_idle: Callable[[], None] | None


def end_when_idle(stream: PendingRequests, end: Callable[[], None]) -> None:
    """Call ``end`` now when no request of ``stream`` is pending, else once the last
    pending one has been answered."""
    if stream.pending:
        stream.on_idle = end
    else:
        end()


class StreamEndedAtShutdown(Exception):
    """A stream the server ended because it is stopping (the call ends UNAVAILABLE)."""


class OpenStreams:
    """``add(end)`` when a stream opens, ``discard(end)`` when it is over; ``end_all()``
    at shutdown calls every ``end``, which ends its stream now when no request of it is
    pending, else once the last one has been answered."""

    __slots__ = ("_ends", "stopping")

    def __init__(self) -> None:
        self._ends: set[Callable[[], None]] = set()
        self.stopping = False

    def __len__(self) -> int:
        return len(self._ends)

    def add(self, end: Callable[[], None]) -> None:
        self._ends.add(end)
        if self.stopping:  # opened while the server stops: ended like the others
            end()

    def discard(self, end: Callable[[], None]) -> None:
        self._ends.discard(end)

    def end_all(self) -> None:
        self.stopping = True
        for end in list(self._ends):
            end()
