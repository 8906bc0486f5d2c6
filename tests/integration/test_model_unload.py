"""Unloading a model releases what its scheduler held, not only its workers."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

import numpy as np
import pytest

from tritium.core import InferRequest, InputTensor
from tritium.service import LoadOptions, ModelManager, Service

MODELS = Path(__file__).resolve().parents[1] / "models"


def _timerfds() -> int:
    count = 0
    for name in os.listdir("/proc/self/fd"):
        try:
            count += "timerfd" in os.readlink(f"/proc/self/fd/{name}")
        except OSError:
            pass
    return count


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="timerfd is Linux-only")
def test_unloading_a_batching_model_closes_its_queue_delay_timer():
    before = _timerfds()

    async def main() -> None:
        manager = ModelManager([MODELS], LoadOptions())
        try:
            await manager.load_all({"batch_merge"})  # max_queue_delay_microseconds: 50000
            service = Service(manager)
            service.started = True
            data = np.array([[7]], np.int32)
            request = InferRequest("batch_merge", "", "1", [InputTensor("X", "INT32", (1, 1), data)])
            response = await asyncio.wait_for(service.infer(request), 30)
            assert int(response.outputs[0].data[0, 0]) == 7
            assert _timerfds() == before + 1  # the batcher waited out its delay on it
        finally:
            try:
                await manager.unload_all(5.0)
            finally:
                manager.kill_all()

    asyncio.run(main())
    assert _timerfds() == before
