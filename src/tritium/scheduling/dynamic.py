"""Triton's dynamic batcher: the asyncio shell around ``BatchPolicy``.

Callback-driven like ``DefaultScheduler``, with no task per request. An arrival is
queued in the policy and, if a runner is idle, the policy is polled; a runner that
completes a batch is handed the next one before the finished responses go out; a single
timer (a ``DeadlineTimer``, precise to microseconds) re-polls when the policy is waiting
out its queue delay; while it waits, arrivals are looked at once per loop turn (after all
of that turn's arrivals are queued). Every
batch goes to a free runner as a list of requests (Triton's Python-backend semantics),
and each caller gets its own response back.

With ``preserve_ordering`` responses are released in dispatch order even when
instances finish batches out of order, as Triton's response delegator does.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Protocol

from tritium.core import Completion, InferRequest, InferResponse
from tritium.core.errors import Rejected, TritiumError, Unavailable
from tritium.scheduling.batch_policy import BatchPolicy, QueuedRequest
from tritium.scheduling.deadline_timer import EarliestWake, Timer
from tritium.scheduling.runner import BatchOutcome, Runner, batch_responses
from tritium.scheduling.waiters import QueueWaiter, fail, hand_out

log = logging.getLogger("tritium.scheduling")

Waiter = Completion  # Completion[InferResponse]: the caller's, callbacks run when settled


class BatchCodec(Protocol):
    """How a batch travels to a runner. The Python backend takes the list of requests
    as they are (the default, no codec); a backend wanting one concatenated tensor per
    input would pack the list into a single request and unpack one response per row."""

    def pack(self, requests: list[InferRequest]) -> list[InferRequest]: ...

    def unpack(
        self, requests: list[InferRequest], responses: list[InferResponse]
    ) -> list[InferResponse]: ...


@dataclass(frozen=True, slots=True)
class DynamicBatcherStatistics:
    queued: int
    idle_runners: int
    executions: int  # batches run (Triton's execution_count)
    inferences: int  # rows run (Triton's inference_count)
    batch_stats: dict[int, int]  # rows in a batch -> executions of that size
    queue_count: int  # requests that left the queue for a runner
    queue_ns: int  # their total time in the queue
    timed_out: int
    rejected_full: int
    queued_by_level: tuple[int, ...]


class _Ticket:
    """A dispatched batch's place in the response order (preserve_ordering)."""

    __slots__ = ("batch", "done", "name", "requests")

    def __init__(self, batch: list[QueuedRequest], requests: list[InferRequest], name: str) -> None:
        self.batch = batch
        self.requests = requests
        self.name = name
        self.done: BatchOutcome | None = None


class DynamicBatcher:
    def __init__(
        self,
        runners: list[Runner],
        policy: BatchPolicy,
        *,
        clock: Callable[[], int] = time.monotonic_ns,
        timer: Timer | None = None,
        codec: BatchCodec | None = None,
    ) -> None:
        self._runners = list(runners)
        self._idle: list[Runner] = list(runners)
        self._policy = policy
        self._clock = clock
        # The default timer counts on the default clock (time.monotonic_ns).
        self._wake = EarliestWake(self._pump, timer)
        self._codec = codec
        self._ordered: deque[_Ticket] | None = deque() if policy.config.preserve_ordering else None
        # id(runner) -> (runner, its batch); runners need not be hashable.
        self._busy: dict[int, tuple[Runner, list[QueuedRequest]]] = {}
        self._pumping = False
        self._pump_soon = False
        self._executions = 0
        self._inferences = 0
        self._batch_stats: dict[int, int] = {}
        self._queue_count = 0
        self._queue_ns = 0
        # --log-verbose when the model loaded: each batch formed is logged (a bool test
        # per batch when off).
        self._debug = log.isEnabledFor(logging.DEBUG)
        for runner in self._runners:
            runner.on_restart_failure(self._on_restart_failure)

    def statistics(self) -> DynamicBatcherStatistics:
        policy = self._policy.statistics()
        return DynamicBatcherStatistics(
            queued=policy.queued,
            idle_runners=len(self._idle),
            executions=self._executions,
            inferences=self._inferences,
            batch_stats=dict(self._batch_stats),
            queue_count=self._queue_count,
            queue_ns=self._queue_ns,
            timed_out=policy.timed_out,
            rejected_full=policy.rejected_full,
            queued_by_level=policy.queued_by_level,
        )

    def submit(self, request: InferRequest) -> Waiter:
        """Queue ``request``; the future gets its response. Cancelling the future
        abandons the request (dropped if queued, flagged if running)."""
        waiter = QueueWaiter()
        now = self._clock()
        waiter.entry = self._policy.enqueue(request, now, waiter)
        waiter.batcher = self
        if self._idle:
            wake = self._wake
            if not wake.armed:
                self._pump()
            elif now >= wake.at:
                # The queue delay ran out while this loop turn's arrivals are still
                # being read: the batch goes now, not after them.
                wake.cancel()
                self._pump()
            elif not self._pump_soon:
                # The policy is waiting out the queue delay: look again once this loop
                # turn's arrivals are all queued rather than on every one of them.
                self._pump_soon = True
                asyncio.get_running_loop().call_soon(self._pump_later)
        return waiter

    def _pump_later(self) -> None:
        self._pump_soon = False
        if self._idle:
            self._pump()

    def fail_all(self, error: TritiumError) -> None:
        """Fail every queued request (model unloading, no instance left)."""
        for entry in self._policy.drain():
            fail(entry.token, error)
        self._wake.cancel()

    # -- dispatch ----------------------------------------------------------------------

    def close(self) -> None:
        """Release the timer; call after ``fail_all`` once the model is unloading."""
        self._wake.close()

    def _pump(self) -> None:
        """Give batches to idle runners for as long as the policy has one ready."""
        if self._pumping:  # a runner callback fired synchronously; the loop below sees it
            return
        self._pumping = True
        try:
            idle = self._idle
            while idle:
                runner = idle.pop()
                if not runner.running:
                    runner.when_ready(partial(self._release, runner))
                    continue
                decision = self._policy.poll(self._clock(), True)
                for entry in decision.rejected:
                    fail(entry.token, Rejected("Request timeout expired"))
                batch = decision.batch
                if batch is None:
                    idle.append(runner)
                    if decision.wake_at_ns is not None:
                        self._wake.arm(decision.wake_at_ns)
                    return
                self._dispatch(runner, batch)
        finally:
            self._pumping = False

    def _dispatch(self, runner: Runner, batch: list[QueuedRequest]) -> None:
        requests = [entry.request for entry in batch]
        try:
            done = runner.submit(self._codec.pack(requests) if self._codec else requests)
        except TritiumError as exc:
            for entry in batch:
                fail(entry.token, exc)
            runner.when_ready(partial(self._release, runner))
            return
        now = self._clock()
        rows = 0
        waited = 0
        for entry in batch:
            rows += entry.rows
            waited += now - entry.enqueue_ns
        self._executions += 1
        self._inferences += rows
        self._batch_stats[rows] = self._batch_stats.get(rows, 0) + 1
        self._queue_count += len(batch)
        self._queue_ns += waited
        if self._debug:
            log.debug(
                "batch of %d requests (%d rows) to %s; waited %.3f ms on average",
                len(batch),
                rows,
                runner.name,
                waited / len(batch) / 1e6,
            )
        self._busy[id(runner)] = (runner, batch)
        ticket = None
        if self._ordered is not None:
            ticket = _Ticket(batch, requests, runner.name)
            self._ordered.append(ticket)
        done.add_done_callback(partial(self._completed, runner, batch, requests, ticket))

    def _completed(
        self,
        runner: Runner,
        batch: list[QueuedRequest],
        requests: list[InferRequest],
        ticket: _Ticket | None,
        done: BatchOutcome,
    ) -> None:
        self._busy.pop(id(runner), None)
        # Hand the runner its next batch first: the instance restarts at once.
        if runner.running:
            self._idle.append(runner)
            self._pump()
        else:
            runner.when_ready(partial(self._release, runner))
        if ticket is None:
            self._deliver(batch, requests, runner.name, done)
            return
        ticket.done = done
        ordered = self._ordered
        assert ordered is not None
        while ordered and ordered[0].done is not None:
            head = ordered.popleft()
            assert head.done is not None
            self._deliver(head.batch, head.requests, head.name, head.done)

    def _deliver(
        self,
        batch: list[QueuedRequest],
        requests: list[InferRequest],
        name: str,
        done: BatchOutcome,
    ) -> None:
        codec = self._codec
        unpack = None if codec is None else partial(codec.unpack, requests)
        hand_out(batch, *batch_responses(done, name, len(batch), unpack))

    def _release(self, runner: Runner) -> None:
        self._idle.append(runner)
        self._pump()

    # -- failures ----------------------------------------------------------------------

    def abandon(self, entry: QueuedRequest) -> None:
        if self._policy.discard(entry):
            return
        for runner, batch in self._busy.values():
            if entry in batch:
                runner.cancel(entry.request)
                return

    def _on_restart_failure(self) -> None:
        # With no instance able to run, queued requests would wait indefinitely.
        if not any(r.running for r in self._runners):
            self.fail_all(Unavailable("no instance of the model is running"))
