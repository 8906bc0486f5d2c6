"""The caller's side of a request queued in a batcher, and how a batch's answers reach it.

A batcher's ``submit`` returns a ``QueueWaiter``: the queue entry and the waiter refer to
each other until the request is settled, when the batcher lets go of the entry before it
settles the waiter (no request outlives its answer waiting for the cycle collector).
Cancelling the waiter abandons the request: the batcher drops it if it is still queued,
or tells the instance running it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from tritium.core import Completion, InferResponse
from tritium.core.write_burst import WRITES


class Abandons(Protocol):
    def abandon(self, entry: Any) -> None:
        """Drop ``entry`` if it is still queued, else tell the instance running it."""
        ...


class Entry(Protocol):
    token: QueueWaiter


class QueueWaiter(Completion):
    """The completion of one queued request (``Completion[InferResponse]``)."""

    __slots__ = ("batcher", "entry")

    batcher: Abandons
    entry: Any  # the batcher's queue entry; None once settled

    def cancel(self, msg: object = None) -> bool:
        entry = self.entry
        if entry is None:  # settled already
            return False
        self.entry = None
        self.batcher.abandon(entry)
        return super().cancel(msg)


def fail(waiter: QueueWaiter, error: BaseException) -> None:
    if not waiter.done():
        waiter.entry = None
        waiter.set_exception(error)


def hand_out(
    batch: Sequence[Entry], responses: Sequence[InferResponse], error: BaseException | None
) -> None:
    """Settle each entry's waiter with its response, or all of them with ``error``. The
    answers are written once all of them are handed out (see write_burst)."""
    with WRITES.held():
        if error is not None:
            for entry in batch:
                fail(entry.token, error)
            return
        for entry, response in zip(batch, responses):
            waiter = entry.token
            if not waiter.done():
                waiter.entry = None
                waiter.set_result(response)
