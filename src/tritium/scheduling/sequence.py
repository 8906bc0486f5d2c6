"""Triton's sequence batcher: the asyncio shell around ``SequencePolicy``.

Callback-driven like the dynamic batcher. Each instance is one runner with its own
sequences; an arrival polls its sequence's instance if that one is idle, a completed
batch polls it again before its responses go out, a ``DeadlineTimer`` re-polls instances
waiting out the queue delay, and a loop timer releases idle sequences. Before a batch
goes out each request gets its control inputs and implicit state (``SequenceTensors``);
when it comes back the state the model returned is kept on the sequence before the next
batch of that instance is formed.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

import numpy as np

from tritium.core import Completion, InferRequest, InferResponse
from tritium.core.errors import TritiumError, Unavailable
from tritium.scheduling.deadline_timer import EarliestWake, Timer
from tritium.scheduling.runner import BatchOutcome, Runner, batch_responses
from tritium.scheduling.sequence_config import SequenceConfig
from tritium.scheduling.sequence_policy import SequenceEntry, SequencePolicy
from tritium.scheduling.sequence_tensors import SequenceTensors
from tritium.scheduling.waiters import QueueWaiter, fail, hand_out

log = logging.getLogger("tritium.scheduling")


@dataclass(frozen=True, slots=True)
class SequenceBatcherStatistics:
    active_sequences: int
    backlog_sequences: int
    queued: int
    idle_released: int
    executions: int
    inferences: int
    batch_stats: dict[int, int]  # requests in a batch -> executions of that size


class _Flight:
    """A batch on its way through one instance (and, with ``preserve_ordering``, its
    place in the response order until its responses go out)."""

    __slots__ = (
        "batch",
        "error",
        "hidden",
        "index",
        "positions",
        "responses",
        "runner",
        "settled",
        "size",
    )

    def __init__(
        self,
        index: int,
        runner: Runner,
        batch: list[SequenceEntry],
        hidden: list[frozenset[str]],
        positions: list[int] | None,
        size: int,
    ) -> None:
        self.index = index
        self.runner = runner
        self.batch = batch
        self.hidden = hidden
        # Where each entry's request sits among the requests sent (None: in order, alone).
        self.positions = positions
        self.size = size
        self.settled = False
        self.error: TritiumError | None = None
        self.responses: list[InferResponse] = []


class SequenceBatcher:
    def __init__(
        self,
        runners: list[Runner],
        config: SequenceConfig,
        *,
        initial_states: dict[str, np.ndarray] | None = None,
        clock: Callable[[], int] = time.monotonic_ns,
        timer: Timer | None = None,
    ) -> None:
        self._runners = list(runners)
        self._policy = SequencePolicy(config, len(self._runners))
        self._tensors = SequenceTensors(config, initial_states)
        # The direct strategy sends a batch's requests at their slots' positions, with
        # null requests (READY false) in the empty slots before the last one, as Triton.
        self._by_slot = config.strategy == "direct" and config.max_batch > 1
        self._clock = clock
        self._wake = EarliestWake(self._on_wake, timer)
        self._idle = [True] * len(self._runners)
        self._flights: list[_Flight | None] = [None] * len(self._runners)
        self._reaper: asyncio.TimerHandle | None = None
        self._closed = False
        # Flights in dispatch order, with preserve_ordering: responses go out in that order.
        self._ordered: deque[_Flight] | None = deque() if config.preserve_ordering else None
        self._executions = 0
        self._inferences = 0
        self._batch_stats: dict[int, int] = {}
        for runner in self._runners:
            runner.on_restart_failure(self._on_restart_failure)

    # -- arrivals ------------------------------------------------------------------------

    def submit(self, request: InferRequest) -> Completion[InferResponse]:
        """Queue ``request`` on its sequence; raises for a request Triton refuses."""
        if self._closed:
            raise Unavailable(f"model '{request.model_name}' is unloading")
        waiter = QueueWaiter()
        now = self._clock()
        entry = self._policy.enqueue(request, now, waiter)
        waiter.entry = entry
        waiter.batcher = self
        if self._reaper is None and self._policy.idle_ns:
            self._arm_reaper(now + self._policy.idle_ns)
        index = entry.sequence.instance
        if index >= 0 and self._idle[index]:
            self._pump(index)
        return waiter

    def statistics(self) -> SequenceBatcherStatistics:
        policy = self._policy.statistics()
        return SequenceBatcherStatistics(
            active_sequences=policy.active,
            backlog_sequences=policy.backlog,
            queued=policy.queued,
            idle_released=policy.idle_released,
            executions=self._executions,
            inferences=self._inferences,
            batch_stats=dict(self._batch_stats),
        )

    # -- batches -------------------------------------------------------------------------

    def _pump(self, index: int) -> None:
        runner = self._runners[index]
        if not runner.running:
            self._idle[index] = False
            runner.when_ready(partial(self._release, index))
            return
        decision = self._policy.poll(index, self._clock())
        if decision.batch is None:
            if decision.wake_at_ns is not None:
                self._wake.arm(decision.wake_at_ns)
            return
        self._dispatch(index, runner, decision.batch)

    def _dispatch(self, index: int, runner: Runner, batch: list[SequenceEntry]) -> None:
        tensors = self._tensors
        with_states = tensors.has_states
        requests: list[InferRequest] = []
        hidden: list[frozenset[str]] = []
        positions = None
        if self._by_slot and batch[-1].sequence.slot + 1 != len(batch):
            requests, positions = self._with_null_requests(batch)
        for entry in batch:
            request = entry.request
            sequence = entry.sequence
            if sequence.corrid is None:
                sequence.corrid = tensors.corrid_tensor(sequence.key) or False
            # Requests of one sequence differ in flags and id: none may travel as a
            # repeat of the one before it.
            request.layout_key = None
            tensors.add_inputs(
                request, entry.start, entry.end, sequence.corrid or None, sequence.state
            )
            if with_states:
                hidden.append(tensors.request_state_outputs(request))
            if positions is None:
                requests.append(request)
        self._idle[index] = False
        try:
            done = runner.submit(requests)
        except TritiumError as exc:
            self._policy.completed(index, batch, self._clock())
            for entry in batch:
                fail(entry.token, exc)
            runner.when_ready(partial(self._release, index))
            return
        self._executions += 1
        self._inferences += len(batch)
        self._batch_stats[len(batch)] = self._batch_stats.get(len(batch), 0) + 1
        flight = _Flight(index, runner, batch, hidden, positions, len(requests))
        self._flights[index] = flight
        if self._ordered is not None:
            self._ordered.append(flight)
        done.add_done_callback(partial(self._completed, flight))

    def _with_null_requests(
        self, batch: list[SequenceEntry]
    ) -> tuple[list[InferRequest], list[int]]:
        """The requests at their slots' positions, null requests in the gaps, and where
        each entry's request went."""
        null = self._tensors.null_request(batch[0].request)
        requests: list[InferRequest] = [null] * (batch[-1].sequence.slot + 1)
        positions = []
        for entry in batch:
            slot = entry.sequence.slot
            requests[slot] = entry.request
            positions.append(slot)
        return requests, positions

    def _completed(self, flight: _Flight, done: BatchOutcome) -> None:
        index = flight.index
        self._flights[index] = None
        batch = flight.batch
        responses, error = batch_responses(done, flight.runner.name, flight.size)
        if error is None:
            if flight.positions is not None:  # the null requests' answers are dropped
                responses = [responses[p] for p in flight.positions]
            if flight.hidden:
                take = self._tensors.take_state
                for entry, response, hidden in zip(batch, responses, flight.hidden):
                    sequence = entry.sequence
                    sequence.state = take(response, hidden, sequence.state)
        # The instance takes its next batch before these responses go out.
        self._policy.completed(index, batch, self._clock())
        self._idle[index] = True
        self._pump(index)
        ordered = self._ordered
        if ordered is None:
            hand_out(batch, responses, error)
            return
        flight.settled, flight.responses, flight.error = True, responses, error
        while ordered and ordered[0].settled:
            head = ordered.popleft()
            hand_out(head.batch, head.responses, head.error)

    def _release(self, index: int) -> None:
        self._idle[index] = True
        self._pump(index)

    # -- timers --------------------------------------------------------------------------

    def _on_wake(self) -> None:
        for index, idle in enumerate(self._idle):
            if idle:
                self._pump(index)

    def _arm_reaper(self, when_ns: int) -> None:
        loop = asyncio.get_running_loop()
        delay = max(0.0, (when_ns - self._clock()) / 1e9)
        self._reaper = loop.call_later(delay, self._reap)

    def _reap(self) -> None:
        self._reaper = None
        if self._closed:
            return
        released, next_ns = self._policy.expire(self._clock())
        for sequence in released:
            log.debug("sequence %r released after being idle", sequence.key)
            sequence.state = None
        if released:
            # Backlog sequences may have taken the freed slots.
            for index, idle in enumerate(self._idle):
                if idle:
                    self._pump(index)
        if next_ns is not None:
            self._arm_reaper(next_ns)

    # -- failures and shutdown -----------------------------------------------------------

    def abandon(self, entry: SequenceEntry) -> None:
        if self._policy.discard(entry):
            return
        for flight in self._flights:
            if flight is not None and entry in flight.batch:
                flight.runner.cancel(entry.request)
                return

    def _on_restart_failure(self) -> None:
        if not any(r.running for r in self._runners):
            self.fail_all(Unavailable("no instance of the model is running"))

    def fail_all(self, error: TritiumError) -> None:
        """Fail every queued request and forget every sequence (model unloading, no
        instance left)."""
        for entry in self._policy.drain():
            fail(entry.token, error)
        self._wake.cancel()

    def close(self) -> None:
        """Release the timers; call after ``fail_all`` once the model is unloading."""
        self._closed = True
        if self._reaper is not None:
            self._reaper.cancel()
            self._reaper = None
        self._wake.close()

