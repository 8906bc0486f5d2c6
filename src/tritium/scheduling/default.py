"""Triton's default scheduler: each request goes alone to a free instance.

Callback-driven, with no task per request: a request that finds an idle runner is
submitted at once; otherwise it waits in a bounded FIFO, and the moment a runner's batch
completes the next request is submitted before the finished response is handed back, so
the instance never waits on the event loop. A full queue rejects at once with UNAVAILABLE
("Exceeds maximum queue size"), as Triton's queue policy does.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from functools import partial

from tritium.core import Completion, InferRequest
from tritium.core.errors import (
    Cancelled,
    InstanceDown,
    InternalError,
    Rejected,
    TritiumError,
    Unavailable,
)
from tritium.scheduling.runner import BatchOutcome, Runner

Waiter = Completion  # Completion[InferResponse]: the caller's, callbacks run when settled


@dataclass(frozen=True, slots=True)
class SchedulerStatistics:
    queued: int
    idle_runners: int
    executions: int
    inferences: int


class DefaultScheduler:
    def __init__(self, runners: list[Runner], max_queue: int = 4096) -> None:
        self._runners = list(runners)
        self._idle: list[Runner] = list(runners)
        self._queue: deque[tuple[InferRequest, Waiter]] = deque()
        self._max_queue = max_queue
        self._executions = 0
        self._inferences = 0
        for runner in self._runners:
            runner.on_restart_failure(self._on_restart_failure)

    def statistics(self) -> SchedulerStatistics:
        return SchedulerStatistics(
            len(self._queue), len(self._idle), self._executions, self._inferences
        )

    def submit(self, request: InferRequest) -> Waiter:
        """Schedule ``request``; the future gets its response. Cancelling the future
        drops a queued request or tells the running one it was cancelled."""
        if not self._idle and len(self._queue) >= self._max_queue:
            raise Rejected("Exceeds maximum queue size")
        waiter: Waiter = Completion()
        if self._idle and not self._queue:
            self._dispatch(self._idle.pop(), request, waiter)
        else:
            self._queue.append((request, waiter))
        return waiter

    def _dispatch(self, runner: Runner, request: InferRequest, waiter: Waiter) -> None:
        try:
            done = runner.submit([request])
        except InstanceDown:
            # The instance died while idle: the request never reached it, so it waits at
            # the head of the queue for the restart or for another idle instance (a model
            # that cannot restart fails its queue: ``_on_restart_failure``, ``fail_all``).
            self._queue.appendleft((request, waiter))
            runner.when_ready(partial(self._release, runner))
            if self._idle:
                self._release(self._idle.pop())
            return
        except TritiumError as exc:
            _fail(waiter, exc)
            runner.when_ready(partial(self._release, runner))
            return
        self._executions += 1
        self._inferences += request.batch_size
        done.add_done_callback(partial(self._completed, runner, request, waiter))
        waiter.add_done_callback(partial(_forward_cancel, runner, request))

    def _completed(
        self, runner: Runner, request: InferRequest, waiter: Waiter, done: BatchOutcome
    ) -> None:
        # Hand the runner its next request first: the worker restarts at once.
        if runner.running:
            self._release(runner)
        else:
            runner.when_ready(partial(self._release, runner))
        if done.cancelled():
            _fail(waiter, Cancelled("request was cancelled"))
            return
        exc = done.exception()
        if exc is not None:
            _fail(waiter, exc if isinstance(exc, TritiumError) else InternalError(str(exc)))
            return
        responses = done.result()
        if len(responses) != 1:
            _fail(waiter, InternalError(f"instance '{runner.name}' returned {len(responses)} responses"))
        elif not waiter.done():
            waiter.set_result(responses[0])

    def _release(self, runner: Runner) -> None:
        while self._queue:
            request, waiter = self._queue.popleft()
            if waiter.done():  # the caller went away while queued
                continue
            self._dispatch(runner, request, waiter)
            return
        self._idle.append(runner)

    def _on_restart_failure(self) -> None:
        # With no instance able to run, queued requests would wait indefinitely.
        if not any(r.running for r in self._runners):
            self.fail_all(Unavailable("no instance of the model is running"))

    def fail_all(self, error: TritiumError) -> None:
        """Fail every queued request (model unloading, no instance left)."""
        while self._queue:
            _, waiter = self._queue.popleft()
            _fail(waiter, error)

    def close(self) -> None:
        """Nothing to release (the dynamic batcher's counterpart frees its timer)."""


def _fail(waiter: Waiter, error: BaseException) -> None:
    if not waiter.done():
        waiter.set_exception(error)


def _forward_cancel(runner: Runner, request: InferRequest, waiter: Waiter) -> None:
    if waiter.cancelled():
        runner.cancel(request)
