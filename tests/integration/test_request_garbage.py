"""Answered requests are freed by reference counting, not left to the cycle collector.

A request travels through the service, the dynamic batcher, a real worker process and
back; if any layer ties its objects into a reference cycle (a queue entry and its
caller's completion, say), every request becomes cyclic garbage: the collector then runs
far more often and its pauses grow with the load, which shows up as tail latency.
"""

from __future__ import annotations

import asyncio
import gc
from pathlib import Path

import numpy as np
import pytest

from tritium.core import InferRequest, InputTensor
from tritium.testing.in_process import serving

MODELS = Path(__file__).resolve().parents[1] / "models"
# The cycle collector counts the whole process: run in `make test`'s one-process pass.
pytestmark = pytest.mark.serial


def _request(i: int) -> InferRequest:
    data = np.array([[i]], np.int32)
    return InferRequest("batch_merge", "", str(i), [InputTensor("X", "INT32", (1, 1), data)])


def test_batched_requests_through_a_worker_leave_no_cyclic_garbage():
    async def main() -> None:
        async with serving([MODELS], {"batch_merge"}) as (_, service):
            # Warm-up: caches and the worker's first replies allocate for good.
            await asyncio.gather(*(service.submit(_request(i)) for i in range(4)))
            gc.collect()
            gc.disable()
            try:
                for _ in range(3):
                    responses = await asyncio.wait_for(
                        asyncio.gather(*(service.submit(_request(i)) for i in range(8))), 30
                    )
                    assert [int(r.outputs[0].data[0, 0]) for r in responses] == list(range(8))
                    del responses
                assert gc.collect() == 0
            finally:
                gc.enable()

    asyncio.run(main())
