"""What the in-process closed-loop CPU benches share (``batch_stream_cpu.py``,
``http_batch_cpu.py``): the real ``identity`` model loaded by the model manager, its batcher
on a clock that stands still while one client read is handled, the stall guard of a closed
loop, the measured phase, and the process exit codes.
"""

from __future__ import annotations

import asyncio
import cProfile
import pstats
import signal
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import uvloop

from tritium.core.heap import settle_heap
from tritium.scheduling import BatchingConfig, BatchPolicy, DynamicBatcher
from tritium.server.app import build_service
from tritium.service import LoadOptions, ModelManager, Service

REPOSITORY = Path(__file__).resolve().parent / "model_repository"
MODEL = "identity"
WARMUP = 2000
#: Stall guard: a phase fails when no response came for this long (valgrind included).
STALL_S = 60.0


class ReadClock:
    """The batcher's clock: while the server handles one client read it reads the time
    the read began, otherwise the monotonic clock.

    Every request of a read then arrives at one instant, so a read of 64 requests is one
    full batch however slowly the process runs (under valgrind each request takes longer
    than the 500 µs queue delay), and a partial batch still leaves when its delay expires.
    """

    __slots__ = ("frozen",)

    def __init__(self) -> None:
        self.frozen: int | None = None

    def __call__(self) -> int:
        frozen = self.frozen
        return time.monotonic_ns() if frozen is None else frozen


def batcher_on_read_clock(manager: ModelManager) -> ReadClock:
    """Give the model its own batcher again (same policy from its config, same instances)
    on a read clock; the manager's one is left idle."""
    loaded = manager.table.get(MODEL)
    clock = ReadClock()
    policy = BatchPolicy(BatchingConfig.from_config(loaded.config))
    loaded.scheduler = DynamicBatcher(loaded.instances, policy, clock=clock)  # type: ignore[arg-type]
    return clock


async def wait_answered(done: asyncio.Future, answered: Callable[[], int]) -> None:
    """Wait for ``done``; fail when ``answered()`` stops growing for ``STALL_S``."""
    seen = -1
    while not done.done():
        if answered() == seen:
            raise SystemExit(f"no response for {STALL_S:.0f} s: the server stalled")
        seen = answered()
        await asyncio.wait((done,), timeout=STALL_S)
    done.result()


async def measured(phase: Awaitable[None], profile: bool) -> float:
    """CPU seconds of this process while ``phase`` runs (heap settled first, as the server
    settles it once serving), with a cProfile summary when ``profile``."""
    settle_heap()
    profiler = cProfile.Profile() if profile else None
    if profiler is not None:
        profiler.enable()
    start = time.process_time()
    await phase
    spent = time.process_time() - start
    if profiler is not None:
        profiler.disable()
        pstats.Stats(profiler).sort_stats("tottime").print_stats(25)
    return spent


async def _with_model(measure: Callable[[ModelManager, Service], Awaitable[None]]) -> None:
    wiring = build_service([REPOSITORY], LoadOptions())
    manager, service = wiring.manager, wiring.service
    # SIGTERM unwinds like Ctrl-C does, through the clean-up below.
    task = asyncio.current_task()
    assert task is not None
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, task.cancel)
    try:
        await manager.load_all({MODEL})
        rows = manager.table_rows()
        if not rows or any(not status.startswith("READY") for _, _, status in rows):
            raise SystemExit(f"model '{MODEL}' did not load: {rows}")
        service.started = True
        await measure(manager, service)
    finally:
        try:
            await manager.unload_all(5.0)
        finally:
            manager.kill_all()  # no worker outlives the bench


def run_with_model(measure: Callable[[ModelManager, Service], Awaitable[None]]) -> None:
    """Load the model, run ``measure(manager, service)``, unload; exit 130 on Ctrl-C and
    143 on SIGTERM."""
    try:
        uvloop.run(_with_model(measure))
    except KeyboardInterrupt:
        raise SystemExit(130) from None
    except asyncio.CancelledError:  # SIGTERM
        raise SystemExit(143) from None
