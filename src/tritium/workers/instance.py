"""A model instance: one worker process plus its identity (name, kind, device id).

The instance is the Runner the schedulers drive: ``submit(batch)`` starts a batch and its
future gets one response per request. When its process dies, the batch in flight fails with
a clear error, the instance reports not ready and restarts itself with a growing back-off
(``RestartBackoff``: the first restart at once, then doubling up to a cap, reset after a
good run); schedulers park it (``when_ready``) until then and hear of every failed restart.
While it waits, ``waiting`` says why and when the next attempt is.

By default an instance is never abandoned for crashing. It stops restarting only when its
model's own code refuses to start again (``initialize`` raised: Triton's behaviour, unless
``restart_after_init_error``), or when a ``CrashPolicy`` with a limit was asked for (so
many exits or failed restarts within a window); it then tells whoever watches it
(``on_gave_up``) why.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

from tritium.core import InferRequest, InferResponse
from tritium.core.clock import now_ns
from tritium.core.completion import Completion
from tritium.core.errors import InstanceDown
from tritium.core.heap import collect_released
from tritium.core.statistics import ModelStatistics
from tritium.ipc.messages import Init
from tritium.workers.launch import WorkerDied
from tritium.workers.process import WorkerProcess
from tritium.workers.restart_backoff import BackoffPolicy, RestartBackoff

log = logging.getLogger("tritium.workers")


@dataclass(frozen=True, slots=True)
class CrashPolicy:
    """Give up after ``limit`` exits or failed restarts within ``window_s`` seconds
    (``limit`` 0, the default: never give up for crashing)."""

    limit: int = 0
    window_s: float = 60.0


@dataclass(frozen=True, slots=True)
class RestartPolicy:
    """How a crashed instance comes back (``--backend-config=python,restart-*``)."""

    backoff: BackoffPolicy = BackoffPolicy()
    crash: CrashPolicy = CrashPolicy()
    #: Keep retrying when the model's ``initialize`` raises on a restart (Triton, and the
    #: default, marks the version UNAVAILABLE with that error instead).
    restart_after_init_error: bool = False


@dataclass(frozen=True, slots=True)
class RestartWait:
    """Why an instance is not running and when it is started next (monotonic seconds)."""

    reason: str
    next_attempt: float
    restarts: int


@dataclass(frozen=True, slots=True)
class InstanceSpec:
    name: str  # Triton's instance name, e.g. "add_sub_0_0"
    kind: str  # "CPU" | "GPU" | "MODEL"
    device_id: int = 0
    #: Set in its worker's environment, on top of the server's (``tritium.device_env``).
    env: tuple[tuple[str, str], ...] = ()


# Starts a fresh worker for this instance: spawn, load model.py, initialize.
Starter = Callable[["ModelInstance"], Awaitable[WorkerProcess]]


class ModelInstance:
    def __init__(
        self,
        spec: InstanceSpec,
        starter: Starter,
        stats: ModelStatistics | None = None,
        crash_policy: CrashPolicy | RestartPolicy = RestartPolicy(),
    ) -> None:
        self.spec = spec
        self.stats = stats if stats is not None else ModelStatistics()
        self.name = spec.name
        self._starter = starter
        self.process: WorkerProcess | None = None
        self._ready = asyncio.Event()
        self._restart_task: asyncio.Task[None] | None = None
        self._stopping = False
        self._ready_waiters: list[Callable[[], None]] = []
        self._failure_listeners: list[Callable[[], None]] = []
        self._gave_up_listeners: list[Callable[[ModelInstance, str], None]] = []
        policy = (
            crash_policy
            if isinstance(crash_policy, RestartPolicy)
            else RestartPolicy(crash=crash_policy)
        )
        self._policy = policy
        self._crash_policy = policy.crash
        self._crashes: deque[float] = deque()
        self._backoff = RestartBackoff(policy.backoff)
        self.restarts = 0
        #: Set while the instance waits to be started again (None while it runs).
        self.waiting: RestartWait | None = None
        # Why the instance stopped restarting ("" while it still does).
        self.gave_up = ""

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process else None

    @property
    def ready(self) -> bool:
        """Running, and the model's optional ``is_ready()`` last said yes."""
        return self._ready.is_set() and self.process is not None and self.process.model_ready

    def init_message(self, config: dict[str, Any]) -> Init:
        return Init(config, self.spec.name, self.spec.kind, self.spec.device_id)

    async def start(self) -> None:
        self._adopt(await self._starter(self))
        self._backoff.started(time.monotonic())
        log.debug("instance '%s' started (pid %s)", self.name, self.process and self.process.pid)

    def _adopt(self, process: WorkerProcess) -> None:
        self.process = process
        process.on_exit = self._on_exit
        self._ready.set()
        waiters, self._ready_waiters = self._ready_waiters, []
        for callback in waiters:
            callback()

    def when_ready(self, callback: Callable[[], None]) -> None:
        """Call ``callback`` once the instance is running again (now if it is)."""
        if self._ready.is_set():
            callback()
        elif not self._stopping:
            self._ready_waiters.append(callback)

    def on_restart_failure(self, callback: Callable[[], None]) -> None:
        """``callback`` runs after every failed restart attempt."""
        self._failure_listeners.append(callback)

    def on_gave_up(self, callback: Callable[[ModelInstance, str], None]) -> None:
        """``callback(instance, reason)`` once the instance stops restarting."""
        self._gave_up_listeners.append(callback)

    @property
    def busy(self) -> bool:
        """A batch is running in the worker."""
        return self.process is not None and self.process.busy

    def _crash_limit_reached(self) -> bool:
        """Count one crash; True when the policy's limit is reached within its window."""
        if self._crash_policy.limit <= 0:
            return False  # never abandoned for crashing
        now = time.monotonic()
        crashes = self._crashes
        crashes.append(now)
        while crashes and now - crashes[0] > self._crash_policy.window_s:
            crashes.popleft()
        return len(crashes) >= self._crash_policy.limit

    def _give_up(self) -> None:
        policy = self._crash_policy
        count = len(self._crashes)
        self.gave_up = (
            f"instance '{self.name}' failed {count} {'time' if count == 1 else 'times'} "
            f"within {policy.window_s:g} s and is not restarted again"
        )
        self._stop_restarting()

    def _stop_restarting(self) -> None:
        log.error("%s", self.gave_up)
        self.waiting = None
        self._stopping = True
        for callback in self._gave_up_listeners:
            callback(self, self.gave_up)

    def _on_exit(self, process: WorkerProcess) -> None:
        if self._stopping or process is not self.process:
            return
        self._ready.clear()
        if self._crash_limit_reached():
            asyncio.ensure_future(process.stop(0.5))
            self._give_up()
            return
        self._wait(f"instance '{self.name}' exited unexpectedly")
        log.error(
            "instance '%s' (pid %s) exited unexpectedly; restarting %s",
            self.name,
            process.pid,
            _when(self.waiting),
        )
        if self._restart_task is None or self._restart_task.done():
            self._restart_task = asyncio.ensure_future(self._restart(process))

    def _wait(self, reason: str) -> None:
        """Count a failure and note when the next start is due."""
        at = self._backoff.failed(time.monotonic())
        self.waiting = RestartWait(reason, at, self.restarts)

    async def _restart(self, dead: WorkerProcess) -> None:
        await dead.stop(0.5)
        while not self._stopping:
            wait = self.waiting
            delay = wait.next_attempt - time.monotonic() if wait is not None else 0.0
            if delay > 0:
                await asyncio.sleep(delay)
            if self._stopping:
                return
            try:
                process = await self._starter(self)
            except Exception as exc:  # noqa: BLE001 - keep trying, report each failure
                log.error("restart of instance '%s' failed: %s", self.name, exc)
                for callback in self._failure_listeners:
                    callback()
                if self._crash_limit_reached():
                    self._give_up()
                    return
                if self._crash_policy.limit <= 0 and not self._transient(exc):
                    # The model's own code refused to start: as Triton, the version is
                    # unavailable with that reason rather than retried forever.
                    self.gave_up = f"restart of instance '{self.name}' failed: {exc}"
                    self._stop_restarting()
                    return
                self._wait(f"restart of instance '{self.name}' failed: {exc}")
                log.info("instance '%s': next restart %s", self.name, _when(self.waiting))
                continue
            if self._stopping:
                await process.stop(1.0)
                return
            self.restarts += 1
            self.waiting = None
            self._backoff.started(time.monotonic())
            self._adopt(process)
            collect_released()  # the dead process is no longer referenced
            log.info("instance '%s' restarted (pid %s)", self.name, process.pid)
            return

    def _transient(self, exc: Exception) -> bool:
        """A failed start worth retrying: the process died or hung while starting (killed,
        out of memory), or restarts after ``initialize`` errors were asked for."""
        return isinstance(exc, WorkerDied) or self._policy.restart_after_init_error

    @property
    def running(self) -> bool:
        return self._ready.is_set()

    def submit(self, batch: list[InferRequest]) -> Completion[list[InferResponse]]:
        """Start ``batch`` now; see :meth:`WorkerProcess.submit`."""
        process = self.process
        if process is None or not self._ready.is_set() or not process.alive:
            if process is not None and not process.alive:
                # Dead before its exit was noticed: not ready from now on, so the batch
                # waits for the restart that the exit notice starts (``when_ready``).
                self._ready.clear()
            raise InstanceDown(f"instance '{self.name}' is not running")
        now = now_ns()
        rows = 0
        for request in batch:
            request.dispatch_ns = now
            rows += request.batch_size
        done = process.submit(batch)
        done.add_done_callback(partial(self._record, batch, rows, process))
        return done

    def _record(
        self, batch: list[InferRequest], rows: int, process: WorkerProcess, done: Completion
    ) -> None:
        """Count the batch's execution, and stamp its compute times on each of its
        requests (ensembles and tracing read them there). Runs before the requests'
        own completions settle: the scheduler adds its callback after this one."""
        if done.exception() is not None:
            return
        input_ns, infer_ns, output_ns = process.last_timing
        timing = (input_ns, infer_ns, output_ns)
        for request in batch:
            request.compute_ns = timing
        self.stats.record_execution(rows, len(batch), input_ns, infer_ns, output_ns)

    def cancel(self, request: InferRequest) -> None:
        if self.process is not None:
            self.process.cancel(request)

    async def stop(self, timeout: float) -> None:
        self._stopping = True
        self._ready.clear()
        if self._restart_task is not None and not self._restart_task.done():
            self._restart_task.cancel()
        if self.process is not None:
            await self.process.stop(timeout)
            log.debug("instance '%s' stopped (pid %s)", self.name, self.process.pid)

    def kill(self) -> None:
        self._stopping = True
        if self.process is not None:
            self.process.kill()


def _when(wait: RestartWait | None) -> str:
    if wait is None:
        return "now"
    delay = wait.next_attempt - time.monotonic()
    return "at once" if delay <= 0 else f"in {delay:.1f} s"
