"""Triton's default scheduler: each request goes alone to a free instance.

No background task: a request that finds an idle runner runs at once; otherwise it waits in
a bounded FIFO and the runner that finishes next picks it up. A full queue rejects at once
with UNAVAILABLE, as Triton's queue policy does.
"""

from __future__ import annotations

import asyncio
from collections import deque
from dataclasses import dataclass

from tritium.core import InferRequest, InferResponse
from tritium.core.errors import InternalError, TritiumError, Unavailable
from tritium.scheduling.runner import Runner


@dataclass(frozen=True, slots=True)
class SchedulerStatistics:
    queued: int
    idle_runners: int
    executions: int
    inferences: int


class DefaultScheduler:
    def __init__(self, runners: list[Runner], max_queue: int = 4096) -> None:
        self._idle: list[Runner] = list(runners)
        self._runners = list(runners)
        self._queue: deque[tuple[InferRequest, asyncio.Future[InferResponse]]] = deque()
        self._max_queue = max_queue
        self._executions = 0
        self._inferences = 0

    def statistics(self) -> SchedulerStatistics:
        return SchedulerStatistics(
            len(self._queue), len(self._idle), self._executions, self._inferences
        )

    async def infer(self, request: InferRequest) -> InferResponse:
        fut: asyncio.Future[InferResponse] = asyncio.get_running_loop().create_future()
        if self._idle and not self._queue:
            # The execution runs in its own task so a caller that goes away (cancelling
            # this await) never leaves an instance half-used.
            asyncio.ensure_future(self._serve(self._idle.pop(), request, fut))
        elif len(self._queue) >= self._max_queue:
            raise Unavailable("Exceeds maximum queue size")
        else:
            self._queue.append((request, fut))
        return await fut

    async def _run(self, runner: Runner, request: InferRequest) -> InferResponse:
        self._executions += 1
        self._inferences += request.batch_size
        responses = await runner.execute([request])
        if len(responses) != 1:
            raise InternalError(f"instance '{runner.name}' returned {len(responses)} responses")
        return responses[0]

    def _release(self, runner: Runner) -> None:
        while self._queue:
            request, fut = self._queue.popleft()
            if fut.done():  # the waiter was cancelled (client went away)
                continue
            asyncio.ensure_future(self._serve(runner, request, fut))
            return
        self._idle.append(runner)

    async def _serve(
        self, runner: Runner, request: InferRequest, fut: asyncio.Future[InferResponse]
    ) -> None:
        try:
            response = await self._run(runner, request)
        except TritiumError as exc:
            if not fut.done():
                fut.set_exception(exc)
        except Exception as exc:  # noqa: BLE001 - never lose a waiter
            if not fut.done():
                fut.set_exception(InternalError(f"internal error: {exc}"))
        else:
            if not fut.done():
                fut.set_result(response)
        finally:
            self._release(runner)

    def fail_all(self, error: TritiumError) -> None:
        """Fail every queued request (model unloading)."""
        while self._queue:
            _, fut = self._queue.popleft()
            if not fut.done():
                fut.set_exception(error)
