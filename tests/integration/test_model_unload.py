"""Unloading a model releases what its scheduler held, not only its workers."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import numpy as np
import pytest

from tritium.core import InferRequest, InputTensor
from tritium.testing.in_process import open_fds, serving

MODELS = Path(__file__).resolve().parents[1] / "models"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="timerfd is Linux-only")
def test_unloading_a_batching_model_closes_its_queue_delay_timer():
    before = open_fds("timerfd")

    async def main() -> None:
        # batch_merge: max_queue_delay_microseconds 50000
        async with serving([MODELS], {"batch_merge"}) as (_, service):
            data = np.array([[7]], np.int32)
            request = InferRequest("batch_merge", "", "1", [InputTensor("X", "INT32", (1, 1), data)])
            response = await asyncio.wait_for(service.submit(request), 30)
            assert int(response.outputs[0].data[0, 0]) == 7
            assert open_fds("timerfd") == before + 1  # the batcher waited out its delay on it

    asyncio.run(main())
    assert open_fds("timerfd") == before
