"""Keep the event loop polling, instead of sleeping, while requests are being served.

With one client waiting for each answer (concurrency 1), a request crosses three processes
(client, this server, the model's worker) and each crossing wakes a sleeping process. On
virtual machines a wake-up is the dearest part of the trip: the waker pays for an
inter-processor interrupt, the sleeper for the switch back in. While exactly one request is
in flight, and for a short while after its answer, this keeps the loop turning (polling its
sockets with a zero timeout) so the worker's reply and the client's next request find it
awake. An idle server stops polling after ``linger_ns``. A lone request that outlasted the
polling budget (a slow model) makes the next one sleep from the start: polling would only
burn the budget; the answer wakes the loop, and the linger after it still catches the
client's next request. A request answered at once (a response-cache replay) is never in
flight; after one the loop lingers the same way, unless such answers come close together
(several clients).

With two or more requests in flight the loop has work of its own, but between batches it
still sleeps and is woken, which puts a wake-up on the path from a worker's reply to its
next batch. Polling then too (yielding the core at each turn, which only hands it to
threads of the same session or cgroup: to the kernel's per-session and per-cgroup fair
shares a poller is as busy as any process) pays on a machine with idle cores and costs on a
full one; ``SpinTrials`` measures which, by the requests answered with and without it,
and the loop polls with several in flight only while the last trial found that it pays.
The instances are then told to poll for their next batch too (``workers_poll``: each batch
carries the hint), so that neither side of a hand-off waits to be woken.
"""

from __future__ import annotations

import asyncio
import os

from tritium.core.clock import now_ns
from tritium.service.requests.spin_trials import SpinTrials

# How long one request may keep the loop polling while its batch runs (a model slower than
# this is not worth the CPU: the wake-up is small beside it), and how long the loop keeps
# polling after the last answer for the client's next request.
BUSY_NS = 1_000_000
LINGER_NS = 150_000
# Requests answered at once this close together come from more than one client.
CROWDED_NS = 25_000


class RequestSpinner:
    """Counts the requests in flight; polls the loop while there is one (or just was), and
    while there are several and polling was found to pay."""

    __slots__ = (
        "in_flight",
        "_until",
        "_spinning",
        "_loop",
        "_busy_ns",
        "_linger_ns",
        "_began",
        "_slow",
        "_last_quick",
        "trials",
    )

    def __init__(self, busy_ns: int = BUSY_NS, linger_ns: int = LINGER_NS) -> None:
        self.in_flight = 0
        self._until = 0
        self._spinning = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self._busy_ns = busy_ns
        self._linger_ns = linger_ns
        self._began = 0  # when the lone request in flight began (0: none, or not alone)
        self._slow = False  # the last lone request outlasted ``busy_ns``
        self._last_quick = 0  # when the last request answered at once was
        self.trials = SpinTrials()  # whether to poll with several in flight

    def begin(self) -> None:
        """A request was accepted."""
        self.in_flight += 1
        if not self._busy_ns:
            return
        now = now_ns()
        if self.in_flight == 1:
            self._began = now
            if self._slow:
                return
        else:
            self._began = 0
            trials = self.trials
            trials.tick(now)
            if not trials.on:
                return
        self._until = now + self._busy_ns
        if not self._spinning:
            self._start()

    def end(self, _done: object = None) -> None:
        """A request was answered (usable as a completion callback)."""
        self.in_flight -= 1
        self.trials.answered()
        if self.in_flight == 0:
            if not (self._began or self._linger_ns):
                return
            now = now_ns()
            if self._began:
                self._slow = now - self._began > self._busy_ns
                self._began = 0
            if self._linger_ns:
                self._until = now + self._linger_ns
                if not self._spinning:
                    self._start()

    def linger(self) -> None:
        """A request was answered at once, never in flight (a response-cache replay):
        with nothing else in flight, poll a while for the client's next request. Such
        requests do not count in flight, so one that follows the last within
        :data:`CROWDED_NS` says other clients are sending: the loop has work of its own,
        and stops polling."""
        if not self._linger_ns:
            return
        now = now_ns()
        crowded = now - self._last_quick < CROWDED_NS
        self._last_quick = now
        if crowded or self.in_flight:
            self._until = 0  # spinning, if it is, stops at its next turn
        else:
            self._until = now + self._linger_ns
            if not self._spinning:
                self._start()

    @property
    def enabled(self) -> bool:
        return bool(self._busy_ns or self._linger_ns)

    def workers_poll(self) -> bool:
        """Whether the instance given a batch now polls for its next one: one client's
        request is all that is in flight (the client sends its next as soon as this is
        answered), or the loop polls with several in flight because the trials found that
        it pays. The instances' polling is part of what the trials measure: their periods
        with polling have the loop and the instances poll, those without neither, since
        either alone leaves a wake-up on the way from a reply to the next batch."""
        return self.in_flight == 1 or self.trials.on

    @property
    def spinning(self) -> bool:
        """The loop is being kept polling now."""
        return self._spinning

    def _start(self) -> None:
        loop = self._loop
        if loop is None:
            loop = self._loop = asyncio.get_running_loop()
        self._spinning = True
        loop.call_soon(self._spin)

    def _spin(self) -> None:
        if now_ns() >= self._until:
            self._spinning = False
            return
        if self.in_flight > 1:
            if not self.trials.on:
                self._spinning = False
                return
            os.sched_yield()
        self._loop.call_soon(self._spin)  # type: ignore[union-attr]
