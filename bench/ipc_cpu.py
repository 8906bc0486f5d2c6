"""Main-process CPU per request of the worker round trip, with a real worker process.

Drives the example add_sub model through ``DefaultScheduler`` → ``ModelInstance`` →
``WorkerProcess`` and back over the real control socket and arenas, one request at a time
(concurrency 1), callback-driven like the frontends (no task per request). The number
printed is this process's CPU only — the worker runs in its own process — so it is the
main-process half of every request's round trip, without HTTP. Deterministic enough to
compare changes on a noisy machine (and under valgrind, which does not follow the worker):

    .venv/bin/python bench/ipc_cpu.py [--requests N] [--profile]
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import pstats
import sys
import time
from pathlib import Path

# Run as a script, bench/ itself is on sys.path; shared pieces are imported as `bench.*`.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np
import uvloop

from bench.add_sub import CONFIG, LOAD_SPEC  # noqa: E402
from tritium.core import InferRequest, InputTensor, RequestedOutput
from tritium.scheduling import DefaultScheduler
from tritium.workers import InstanceSpec, ModelInstance, WorkerProcess


async def _start(instance: ModelInstance) -> WorkerProcess:
    process = WorkerProcess("add_sub:1")
    await process.spawn()
    await process.load(LOAD_SPEC, 30)
    await process.initialize(instance.init_message(CONFIG), 30)
    return process


_LAYOUT = object()  # what a frontend's cached request plan sets as the layout key


def _request(a: np.ndarray, b: np.ndarray) -> InferRequest:
    # As the HTTP frontend builds it from a cached header plan.
    request = InferRequest("add_sub", "", "")
    request.layout_key = _LAYOUT
    request.inputs = [InputTensor("INPUT0", "FP32", (4,), a), InputTensor("INPUT1", "FP32", (4,), b)]
    request.outputs = [RequestedOutput("OUTPUT0", {}), RequestedOutput("OUTPUT1", {})]
    return request


async def _drive(scheduler: DefaultScheduler, count: int) -> None:
    """``count`` requests back to back, each submitted from the previous one's callback."""
    loop = asyncio.get_running_loop()
    finished = loop.create_future()
    a = np.arange(4, dtype=np.float32)
    b = np.ones(4, dtype=np.float32)
    left = count

    def on_done(done: asyncio.Future) -> None:
        nonlocal left
        response = done.result()
        if response.error is not None or len(response.outputs) != 2:
            finished.set_exception(RuntimeError(f"bad response: {response}"))
            return
        left -= 1
        if left:
            scheduler.submit(_request(a, b)).add_done_callback(on_done)
        else:
            finished.set_result(None)

    scheduler.submit(_request(a, b)).add_done_callback(on_done)
    await finished


async def _run(requests: int, profile: bool) -> None:
    instance = ModelInstance(InstanceSpec("add_sub_0", "CPU"), _start)
    await instance.start()
    scheduler = DefaultScheduler([instance])
    try:
        await _drive(scheduler, 2000)  # warm up
        profiler = cProfile.Profile() if profile else None
        if profiler is not None:
            profiler.enable()
        start = time.process_time()
        await _drive(scheduler, requests)
        spent = time.process_time() - start
        if profiler is not None:
            profiler.disable()
            pstats.Stats(profiler).sort_stats("tottime").print_stats(25)
    finally:
        await instance.stop(5)
    print(f"{spent / requests * 1e6:.1f} µs main-process CPU per request ({requests} requests)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=20000)
    parser.add_argument("--profile", action="store_true", help="print a cProfile summary")
    args = parser.parse_args()
    uvloop.run(_run(args.requests, args.profile))


if __name__ == "__main__":
    main()
