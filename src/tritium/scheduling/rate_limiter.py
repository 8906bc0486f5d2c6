"""Triton's rate limiter (``--rate-limit=execution_count``): an instance runs a batch only
once the resources its group lists are free, and waiting instances go in priority order.

It sits between a scheduler and its instances: ``RateLimiter.register`` wraps each instance
that needs resources in a ``LimitedRunner``, which the scheduler drives like any runner.
The scheduler hands it a batch as usual; the batch starts on the instance once the limiter
grants the resources (at once when they are free and nobody ranks first), and the
resources are given back when the batch ends. While it waits the instance is busy for its
scheduler, as in Triton (the batch is formed, the instance staged), and the wait counts in
the requests' queue time (an instance stamps a request when it starts it).

Who goes next when several wait, as Triton ranks them: the lowest ``(executions + 1) x
priority`` (priority 0 read as 1; ties: the one waiting longest), so an instance of
priority 2 gets half the turns of one of priority 1, and three queued requests of an
instance of priority 1 all run before those of one of priority 10. Only the first in that
order may start: a large need is not overtaken forever by small ones.

With the rate limiter off (the default) nothing is wrapped and nothing here runs. Instances
that need no resources are not wrapped either: they never wait.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

from tritium.config.rate_limiter import GroupRateLimiter
from tritium.core import Completion, InferRequest, InferResponse
from tritium.core.errors import TritiumError, Unavailable
from tritium.scheduling.rate_limit_resources import (
    GLOBAL,
    Key,
    ResourcePool,
    explicit_resources,
)
from tritium.scheduling.runner import BatchOutcome, Runner


@dataclass(frozen=True, slots=True)
class RateLimiterStatistics:
    """What the limiter holds now: instances waiting, and copies per resource."""

    waiting: int
    limits: dict[Key, int]
    taken: dict[Key, int]


def instance_needs(limits: GroupRateLimiter, device: int) -> dict[Key, int]:
    """What an instance of a group with ``limits`` on ``device`` takes to run a batch."""
    return {
        (GLOBAL if use.is_global else device, use.name): use.count
        for use in limits.resources
        if use.count > 0
    }


class LimitedRunner:
    """A runner whose batches start only when the rate limiter grants its resources."""

    __slots__ = (
        "_cancelled",
        "_limiter",
        "_runner",
        "_waiting",
        "executions",
        "holding",
        "name",
        "needs",
        "priority",
    )

    def __init__(
        self, runner: Runner, limiter: RateLimiter, needs: dict[Key, int], priority: int
    ) -> None:
        self.name = runner.name
        self._runner = runner
        self._limiter = limiter
        self.needs = needs
        self.priority = max(priority, 1)
        #: Batches run since registration (Triton's execution count, which weighs the rank).
        self.executions = 0
        #: Whether it holds its resources (a batch is running).
        self.holding = False
        self._waiting: tuple[list[InferRequest], Completion[list[InferResponse]]] | None = None
        self._cancelled: list[InferRequest] = []

    @property
    def runner(self) -> Runner:
        return self._runner

    @property
    def rank(self) -> int:
        return (self.executions + 1) * self.priority

    @property
    def waiting(self) -> bool:
        return self._waiting is not None

    @property
    def waiting_requests(self) -> int:
        """Requests of the batch waiting here for resources (0 when none waits)."""
        waiting = self._waiting
        return 0 if waiting is None else len(waiting[0])

    @property
    def running(self) -> bool:
        return self._runner.running

    @property
    def busy(self) -> bool:
        """A batch waits for resources here or runs in the instance."""
        return (
            self._waiting is not None or self.holding or bool(getattr(self._runner, "busy", False))
        )

    def submit(self, batch: list[InferRequest]) -> Completion[list[InferResponse]]:
        outcome: Completion[list[InferResponse]] = Completion()
        self._waiting = (batch, outcome)
        self._limiter.stage(self)
        return outcome

    def cancel(self, request: InferRequest) -> None:
        waiting = self._waiting
        if waiting is not None and any(r is request for r in waiting[0]):
            self._cancelled.append(request)  # told to the instance once the batch starts
        else:
            self._runner.cancel(request)

    def when_ready(self, callback: Callable[[], None]) -> None:
        self._runner.when_ready(callback)

    def on_restart_failure(self, callback: Callable[[], None]) -> None:
        self._runner.on_restart_failure(callback)

    def start(self) -> None:
        """Run the waiting batch: the limiter has taken its resources."""
        waiting = self._waiting
        assert waiting is not None
        batch, outcome = waiting
        self._waiting = None
        cancelled, self._cancelled = self._cancelled, []
        self.holding = True
        try:
            done = self._runner.submit(batch)
        except TritiumError as exc:
            self.holding = False
            self._limiter.release(self)
            outcome.set_exception(exc)
            return
        for request in cancelled:
            self._runner.cancel(request)
        done.add_done_callback(partial(self._completed, outcome))

    def abandon(self, error: TritiumError) -> None:
        """Fail the waiting batch (the limiter no longer serves this instance)."""
        waiting = self._waiting
        if waiting is not None:
            self._waiting = None
            self._cancelled = []
            if not waiting[1].done():
                waiting[1].set_exception(error)

    def _completed(self, outcome: Completion[list[InferResponse]], done: BatchOutcome) -> None:
        # Counted, then settled: the scheduler hands this instance its next batch at once,
        # staged (with its new rank) while the resources are still held, so the release
        # below ranks it with the others.
        self.executions += 1
        if done.cancelled():
            outcome.cancel()
        else:
            exc = done.exception()
            if exc is not None:
                outcome.set_exception(exc)
            else:
                outcome.set_result(done.result())
        self.holding = False
        self._limiter.release(self)


class RateLimiter:
    """The server's one rate limiter: resources shared by every model, and the instances
    waiting for them in priority order."""

    def __init__(self, explicit: Mapping[int, Mapping[str, int]] | None = None) -> None:
        self.pool = ResourcePool(explicit)
        self._staged: list[tuple[int, int, LimitedRunner]] = []
        self._order = itertools.count()
        self._granting = False
        self._again = False

    @classmethod
    def for_mode(cls, mode: str, resources: tuple[str, ...] = ()) -> RateLimiter | None:
        """The limiter ``--rate-limit=<mode>`` asks for with ``--rate-limit-resource``
        values ``resources``: None when the mode is "off" (every rate_limiter ignored)."""
        if mode.lower() != "execution_count":
            return None
        return cls(explicit_resources(resources))

    def statistics(self) -> RateLimiterStatistics:
        waiting = sum(1 for _, _, r in self._staged if r.waiting)
        return RateLimiterStatistics(waiting, self.pool.limits(), self.pool.taken())

    def register(self, instances: Sequence[tuple[Any, GroupRateLimiter, int]]) -> list[Any]:
        """Count the needs of one version's instances (runner, its group's settings, its
        device) and return the runners its scheduler drives: a ``LimitedRunner`` for each
        that needs resources, the runner itself for the others. Raises ``InvalidArgument``
        (Triton's text) when the resources listed cannot run one of them."""
        wrapped: list[Any] = []
        owners: dict[Any, dict[Key, int]] = {}
        for runner, limits, device in instances:
            needs = instance_needs(limits, device)
            if not needs:
                wrapped.append(runner)
                continue
            limited = LimitedRunner(runner, self, needs, limits.priority)
            owners[limited] = needs
            wrapped.append(limited)
        if owners:
            self.pool.register(owners)
        return wrapped

    def unregister(self, runners: Sequence[Any], reason: str = "is unloading") -> None:
        """Forget a version's runners: batches still waiting fail, the limits shrink."""
        gone = [r for r in runners if isinstance(r, LimitedRunner)]
        if not gone:
            return
        for runner in gone:
            runner.abandon(Unavailable(f"instance '{runner.name}' {reason}"))
        self.pool.unregister(list(gone))
        self._grant()  # smaller needs may let the first in line go

    def stage(self, runner: LimitedRunner) -> None:
        heapq.heappush(self._staged, (runner.rank, next(self._order), runner))
        self._grant()

    def release(self, runner: LimitedRunner) -> None:
        self.pool.give_back(runner.needs)
        self._grant()

    def _grant(self) -> None:
        """Start waiting batches in rank order while the first one's resources are free."""
        if self._granting:  # re-entered from a batch that ended at once; the loop sees it
            self._again = True
            return
        self._granting = True
        try:
            staged = self._staged
            pool = self.pool
            again = True
            while again:
                self._again = again = False
                while staged:
                    runner = staged[0][2]
                    if not runner.waiting:  # abandoned while staged
                        heapq.heappop(staged)
                        continue
                    if not pool.try_take(runner.needs):
                        break
                    heapq.heappop(staged)
                    runner.start()
                again = self._again
        finally:
            self._granting = False
