"""The answers of one streamed BLS call (``exec(decoupled=True)``), queued in a worker.

The server sends a decoupled model's responses to the calling worker one record each, in
order, the last one final. The worker's reader (or a synchronous caller reading the
socket itself) hands each to :meth:`ReplyStream.deliver`; model code takes them with
:meth:`take` (blocking) or :meth:`take_async` (on its event loop).

Flow control: the server lets at most ``MAX_UNREAD`` answers of one call be on their way
without model code having taken them (it cancels the call beyond that), and model code
says how many it took every ``ACK_EVERY`` answers, so a reader that keeps up never hits
the bound and one that stops reading holds at most that many answers in either process.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections import deque
from typing import Protocol

from tritium.backends.python.bls_answers import Answer, CallError
from tritium.ipc.call_records import MAX_UNREAD
from tritium.ipc.messages import CancelCall, MoreAnswers

Item = Answer | CallError

#: Model code reports what it took after this many answers (well under ``MAX_UNREAD``).
ACK_EVERY = MAX_UNREAD // 16


class StreamClient(Protocol):
    """What a reply stream needs of the call channel's client (``bls.CallClient``)."""

    def notify(self, message: MoreAnswers | CancelCall) -> None:
        """Send a record that gets no answer (``more``, ``cancel``)."""

    def wait_stream(self, stream: ReplyStream, deadline: float) -> None:
        """Until ``stream`` has an answer queued, or ``deadline`` (monotonic) passes."""

    def ensure_reader(self) -> None:
        """Start the thread that reads answers off the socket, if it is not running."""

    def drop_stream(self, call_id: int) -> None:
        """Nobody reads the call's answers any more: cancel it, discard what comes."""


class ReplyStream:
    __slots__ = ("client", "call_id", "closed", "_cond", "_items", "_waiter", "_untold")

    def __init__(self, client: StreamClient) -> None:
        self.client = client
        self.call_id = 0  # set when the call is sent
        #: True once the final answer was taken, or the call cancelled or dropped.
        self.closed = False
        self._cond = threading.Condition(threading.Lock())
        self._items: deque[tuple[Item, bool]] = deque()
        self._waiter: asyncio.Future[None] | None = None
        self._untold = 0  # answers taken and not yet reported to the server

    # -- the reader's side -------------------------------------------------------------

    def deliver(self, item: Item, final: bool) -> None:
        with self._cond:
            self._items.append((item, final))
            self._cond.notify_all()
            waiter, self._waiter = self._waiter, None
        if waiter is not None:
            waiter.get_loop().call_soon_threadsafe(_wake, waiter)

    def ready(self) -> bool:
        return bool(self._items)

    def wait(self, timeout: float) -> None:
        with self._cond:
            if not self._items:
                self._cond.wait(timeout)

    # -- model code's side -------------------------------------------------------------

    def take(self, timeout: float) -> tuple[Item, bool]:
        """The next answer and whether it is the last, waiting up to ``timeout`` s."""
        if not self._items:
            self.client.wait_stream(self, time.monotonic() + timeout)
        with self._cond:
            if self._items:
                item, final = self._items.popleft()
            else:  # the channel went away before this stream was told
                item, final = CallError("UNAVAILABLE", "the call channel is gone"), True
        self._taken(final)
        return item, final

    async def wait_async(self) -> None:
        """Until an answer is queued (the worker's reader thread delivers it)."""
        if self._items:
            return
        self.client.ensure_reader()
        while True:
            with self._cond:
                if self._items:
                    return
                waiter = self._waiter = asyncio.get_running_loop().create_future()
            await waiter

    async def take_async(self) -> tuple[Item, bool]:
        await self.wait_async()
        with self._cond:
            item, final = self._items.popleft()
        self._taken(final)
        return item, final

    def _taken(self, final: bool) -> None:
        if final:
            self.closed = True
            return
        self._untold += 1
        if self._untold >= ACK_EVERY:
            self.client.notify(MoreAnswers(self.call_id, self._untold))
            self._untold = 0

    def cancel(self) -> None:
        """Ask the server to cancel the call; its last answer still comes (an error)."""
        if not self.closed:
            self.client.notify(CancelCall(self.call_id))

    def drop(self) -> None:
        """Nobody will read on: cancel the call and discard what still comes."""
        if not self.closed:
            self.closed = True
            self.client.drop_stream(self.call_id)


def _wake(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)
