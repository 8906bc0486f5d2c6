"""Ensemble step tensors: copied through the server, or left in shared memory.

``--crossover`` (default) measures, in process and without workers, the server's CPU for
one step boundary (a step's output handed to the next step's worker) for tensor sizes
from 4 KiB to 4 MiB, both ways: the copy path (the output copied out of the worker's
arena, then into the next worker's input arena) and the shared path (a block and its
finalizer, the output a view of it, the next worker's input a reference). Where the
shared path becomes the cheaper one is ``KEEP_MIN_BYTES`` in ``tritium.ipc.shared_arenas``.

``--ensemble DIR`` runs the ensemble ``--model`` (default ``identity_chain`` of the shared
bench models: input ``INPUT0``, FP32 ``[1, rows]``) of repository ``DIR`` in process, back
to back, and prints wall time and main-process CPU per request:

    nice .venv/bin/python bench/shared_steps.py --crossover
    nice .venv/bin/python bench/shared_steps.py \
        --ensemble ../shared/tools/bench-models/triton --rows 1048576   # 4 MiB per step
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import time
from pathlib import Path

import numpy as np

from tritium.core import InferRequest, InputTensor
from tritium.ipc import Arena
from tritium.ipc.messages import ReplyItem, Result
from tritium.ipc.shared_arenas import SharedArena, reference
from tritium.workers.batch_messages import read_responses, write_batch
from tritium.workers.output_pool import OutputPool

SIZES = [4 << 10, 16 << 10, 32 << 10, 64 << 10, 128 << 10, 256 << 10, 1 << 20, 4 << 20]


def _reply(nbytes: int) -> Result:
    return Result([ReplyItem([("Y", "FP32", [1, nbytes // 4], nbytes)])], end=nbytes)


def _step(data: np.ndarray) -> InferRequest:
    return InferRequest("next", "", "", [InputTensor("X", "FP32", data.shape, data)])


def _copy_path(out: Arena, into: Arena, nbytes: int) -> None:
    batch = [InferRequest("step", "", "")]
    (response,) = read_responses(batch, _reply(nbytes), out.buf, "step")
    write_batch([_step(response.outputs[0].data)], lambda size: into)


def _shared_path(pool: OutputPool, into: Arena, nbytes: int) -> None:
    batch = [InferRequest("step", "", "")]
    arena = pool.offer()
    assert arena is not None
    kept = pool.keep(arena, nbytes)
    (response,) = read_responses(batch, _reply(nbytes), None, "step", kept)
    data = response.outputs[0].data
    found = reference(data)
    assert found is not None
    refs: list = [[found[0].id, found[1]]]
    write_batch([_step(data)], lambda size: into, None, False, refs, 7)


def _per_call(fn, rounds: int) -> float:  # noqa: ANN001
    fn()
    gc.collect()
    start = time.process_time()
    for _ in range(rounds):
        fn()
    return (time.process_time() - start) / rounds * 1e6


def crossover(rounds: int) -> None:
    out = Arena.create(8 << 20)
    into = Arena.create(8 << 20)
    pool = OutputPool(lambda size: SharedArena.create(max(size, 8 << 20)))
    print(f"{'bytes':>9}  {'copy µs':>8}  {'shared µs':>9}")
    try:
        for nbytes in SIZES:
            n = max(rounds // max(nbytes >> 16, 1), 50)
            copy = _per_call(lambda nbytes=nbytes: _copy_path(out, into, nbytes), n)
            shared = _per_call(lambda nbytes=nbytes: _shared_path(pool, into, nbytes), n)
            print(f"{nbytes:>9}  {copy:>8.1f}  {shared:>9.1f}")
    finally:
        pool.close()
        out.close()
        into.close()


async def _ensemble(repo: Path, model: str, rows: int, requests: int) -> None:
    from tritium.server.app import build_service
    from tritium.service import LoadOptions

    wiring = build_service([repo], LoadOptions())
    manager, service = wiring.manager, wiring.service
    try:
        await manager.load_all({model})
        service.started = True
        x = np.ones((1, rows), np.float32)

        def request() -> InferRequest:
            return InferRequest(model, "", "", [InputTensor("INPUT0", "FP32", x.shape, x)])

        for _ in range(5):
            await service.submit(request())
        wall = time.perf_counter()
        cpu = time.process_time()
        for _ in range(requests):
            response = await service.submit(request())
            assert response.error is None, response.error
            del response
        wall = time.perf_counter() - wall
        cpu = time.process_time() - cpu
        print(
            f"{model}, {rows * 4 >> 10} KiB per step: {wall / requests * 1e3:.2f} ms per "
            f"request, {cpu / requests * 1e3:.2f} ms main-process CPU ({requests} requests)"
        )
    finally:
        try:
            await manager.unload_all(5.0)
        finally:
            manager.kill_all()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--crossover", action="store_true")
    parser.add_argument("--rounds", type=int, default=2000)
    parser.add_argument("--ensemble", type=Path, help="a model repository")
    parser.add_argument("--model", default="identity_chain")
    parser.add_argument("--rows", type=int, default=1 << 20)
    parser.add_argument("--requests", type=int, default=100)
    args = parser.parse_args()
    if args.ensemble is not None:
        asyncio.run(_ensemble(args.ensemble, args.model, args.rows, args.requests))
    else:
        crossover(args.rounds)


if __name__ == "__main__":
    main()
