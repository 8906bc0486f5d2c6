"""Reloading a model and replacing a killed worker leave nothing behind in the server
process: after warm-up, N more unload/load cycles and N more ``kill -9`` + restart cycles
add no live objects of the kinds a version or a worker owns (processes, arenas, channels,
instances, versions, tasks, mappings) and no file descriptors. A counting fact, not a
timing one: a leak of one object per reload fails every run."""

from __future__ import annotations

import asyncio
import collections
import gc
import os
import signal
import weakref
from pathlib import Path

import pytest

from tritium.core.heap import settle_heap
from tritium.service import LoadOptions
from tritium.testing.in_process import serving
from tritium.workers import BackoffPolicy

REPO = Path(__file__).resolve().parents[2] / "examples" / "model_repository"
MODEL = "identity"
CYCLES = 8
#: What each version or worker owns; any of them left per cycle is a leak.
WATCHED = (
    "WorkerProcess",
    "ModelInstance",
    "LoadedVersion",
    "Arena",
    "WorkerArenas",
    "CallChannel",
    "ResponseStreams",
    "StepTensors",
    "BatchWriter",
    "Popen",
    "mmap",
    "Task",
    "socket",
)


def _counts() -> collections.Counter[str]:
    gc.collect()
    names = set(WATCHED)
    return collections.Counter(t for o in gc.get_objects() if (t := type(o).__name__) in names)


def _fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def _pids(manager: object) -> list[int]:
    entry = manager._entry(MODEL)  # type: ignore[attr-defined]
    return [
        i.pid
        for status in entry.versions.values()
        if status.loaded is not None
        for i in status.loaded.instances
        if i.pid is not None and i.ready
    ]


async def _kill_and_wait(manager: object) -> None:
    (pid,) = _pids(manager)
    os.kill(pid, signal.SIGKILL)
    for _ in range(600):  # up to 60 s on a loaded machine
        await asyncio.sleep(0.1)
        now = _pids(manager)
        if now and pid not in now:
            return
    raise AssertionError("the killed worker was not replaced")


@pytest.mark.timeout(240)
@pytest.mark.parametrize("fault", ["reload", "kill"])
def test_reloads_and_replaced_workers_leave_no_objects_behind(fault: str) -> None:
    async def main() -> None:
        options = LoadOptions(restart_backoff=BackoffPolicy(0.01, 0.05, 3600.0))
        async with serving([REPO], [MODEL], load_options=options) as (manager, _):

            async def cycle() -> None:
                if fault == "reload":
                    await manager.unload(MODEL)
                    await manager.load(MODEL)
                else:
                    await _kill_and_wait(manager)

            for _ in range(2):  # warm-up: lazily built caches, the executor's threads
                await cycle()
            await asyncio.sleep(0.2)
            before, fds = _counts(), _fds()
            for _ in range(CYCLES):
                await cycle()
            await asyncio.sleep(0.2)
            after = _counts()
            grown = {k: after[k] - before[k] for k in WATCHED if after[k] > before[k]}
            assert not grown, f"left behind after {CYCLES} cycles ({fault}): {grown}"
            assert _fds() <= fds, f"descriptors {fds} -> {_fds()}"

    asyncio.run(main())


async def _released(ref: weakref.ref[object], seconds: float) -> bool:
    """Whether ``ref`` dies within ``seconds`` without anyone here collecting."""
    for _ in range(int(seconds / 0.05)):
        if ref() is None:
            return True
        await asyncio.sleep(0.05)
    return ref() is None


@pytest.mark.timeout(120)
@pytest.mark.parametrize("fault", ["reload", "kill"])
def test_released_versions_and_workers_are_freed_with_a_settled_heap(fault: str) -> None:
    """As in the server: the heap is settled (frozen, young collections spaced out) once
    the models are loaded. A version unloaded or a worker replaced after that is freed
    within a couple of seconds all the same — the cyclic graphs they hold included."""

    async def main() -> None:
        options = LoadOptions(restart_backoff=BackoffPolicy(0.01, 0.05, 3600.0))
        async with serving([REPO], [MODEL], load_options=options) as (manager, _):
            entry = manager._entry(MODEL)
            (status,) = entry.versions.values()
            version = status.loaded
            (instance,) = version.instances
            target = weakref.ref(version if fault == "reload" else instance.process)
            del status, version, instance
            settle_heap()
            if fault == "reload":
                await manager.unload(MODEL)
                await manager.load(MODEL)
            else:
                await _kill_and_wait(manager)
            assert await _released(target, 5.0), f"the {fault}ed object is still alive"

    threshold = gc.get_threshold()
    try:
        asyncio.run(main())
    finally:
        gc.unfreeze()
        gc.set_threshold(*threshold)
