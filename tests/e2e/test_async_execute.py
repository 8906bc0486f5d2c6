"""``async def execute`` in an ordinary model runs as a task on the model's event loop, as
Triton awaits it: asyncio's task-bound helpers work inside it, tasks the model starts go on
between batches, errors (raised or timed out) become that batch's error responses, and a
coroutine ``finalize`` is awaited at shutdown. Over HTTP and gRPC with the real clients."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from tritium.testing import ServerProcess

ROOT = Path(__file__).resolve().parents[2]
MODELS = ROOT / "tests" / "models"


@pytest.fixture(scope="module")
def server():
    with ServerProcess(
        [MODELS], ["--model-control-mode=explicit", "--load-model=async_tasks"], grpc=True
    ) as s:
        yield s


def _infer(module, url: str, x: int) -> tuple[int, int]:
    client = module.InferenceServerClient(url)
    tensor = module.InferInput("X", [1, 1], "INT32")
    tensor.set_data_from_numpy(np.array([[x]], np.int32))
    try:
        result = client.infer("async_tasks", [tensor])
        return int(result.as_numpy("Y")[0, 0]), int(result.as_numpy("TICKS")[0, 0])
    finally:
        client.close()


def _http(server: ServerProcess, x: int) -> tuple[int, int]:
    return _infer(httpclient, server.http_url, x)


def _grpc(server: ServerProcess, x: int) -> tuple[int, int]:
    return _infer(grpcclient, server.grpc_url, x)


@pytest.mark.parametrize("call", [_http, _grpc], ids=["http", "grpc"])
def test_execute_runs_as_a_task_and_background_tasks_go_on(server, call):
    y, ticks_before = call(server, 7)
    assert y == 7
    time.sleep(0.2)  # the loop only runs while the model is awaited
    y, ticks_after = call(server, 1)
    assert y == 1
    # The beat task ran during each execution (it sleeps 1 ms, execute awaits 2 ms).
    assert ticks_after > ticks_before


@pytest.mark.parametrize("call", [_http, _grpc], ids=["http", "grpc"])
def test_a_raised_error_and_a_timeout_fail_only_their_batch(server, call):
    with pytest.raises(InferenceServerException, match="asked to fail"):
        call(server, 2)
    with pytest.raises(InferenceServerException, match="TimeoutError"):
        call(server, 3)
    assert call(server, 5)[0] == 5  # the instance keeps serving


def test_a_coroutine_finalize_is_awaited_at_shutdown():
    with ServerProcess(
        [MODELS], ["--model-control-mode=explicit", "--load-model=async_tasks"]
    ) as server:
        assert _http(server, 4)[0] == 4
    assert any("async_tasks finalized after" in line for line in server.lines)
