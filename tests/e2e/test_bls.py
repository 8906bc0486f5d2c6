"""BLS (``pb_utils.InferenceRequest(...).exec()`` / ``async_exec()``) through a real server.

Models in ``tests/pipeline_models``: ``bls_call`` (calls the model its "target" parameter
names, synchronously, N calls side by side with ``async_exec``, or asks readiness),
``bls_self`` (calls itself) and ``bls_ping``/``bls_pong`` (call each other), all with one
instance each but ``bls_call`` (two); and ``bls_add_sub`` from ``bench/model_repository``.
"""

from __future__ import annotations

import concurrent.futures
import json
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from tritium.testing import ServerProcess

ROOT = Path(__file__).resolve().parents[2]
PIPELINES = ROOT / "tests" / "pipeline_models"
BENCH_MODELS = ROOT / "bench" / "model_repository"  # the bench models, in this repository
MODELS = ("bls_call", "bls_self", "bls_ping", "bls_pong", "ens_two_step", "ens_slow_inc")


@pytest.fixture(scope="module")
def server() -> Iterator[ServerProcess]:
    args = ["--model-control-mode=explicit", *(f"--load-model={m}" for m in MODELS)]
    args += ["--load-model=bls_add_sub", "--load-model=add_sub"]
    with ServerProcess([PIPELINES, BENCH_MODELS], args, grpc=True) as proc:
        yield proc


@pytest.fixture(params=["http", "grpc"])
def protocol(request: pytest.FixtureRequest) -> str:
    return request.param


def _client(server: ServerProcess, protocol: str):  # noqa: ANN202
    if protocol == "http":
        return httpclient, httpclient.InferenceServerClient(server.http_url, network_timeout=60)
    return grpcclient, grpcclient.InferenceServerClient(server.grpc_url)


def _bls(server, protocol, x, model="bls_call", **params):  # noqa: ANN001, ANN202
    """Call ``model`` with X; returns (Y, INFO as a dict or None)."""
    module, client = _client(server, protocol)
    try:
        inp = module.InferInput("X", list(x.shape), "FP32")
        inp.set_data_from_numpy(x)
        result = client.infer(model, [inp], parameters=params or None)
        info = result.as_numpy("INFO") if model == "bls_call" else None
        return result.as_numpy("Y"), (json.loads(info[0]) if info is not None else None)
    finally:
        client.close()


def _stats(server: ServerProcess, model: str) -> dict:
    client = httpclient.InferenceServerClient(server.http_url)
    try:
        return client.get_inference_statistics(model)["model_stats"][0]
    finally:
        client.close()


def _batched_executions(stats: dict) -> int:
    """Executions of more than one row: requests that ran in one batch together."""
    return sum(
        int(b["compute_infer"]["count"]) for b in stats["batch_stats"] if int(b["batch_size"]) > 1
    )


def test_sync_exec_returns_the_target_outputs(server, protocol):
    x = np.array([[1, 2, 3]], np.float32)
    y, info = _bls(server, protocol, x, target="ens_double")
    np.testing.assert_array_equal(y, 2 * x)
    assert info["sums"] == [12.0]


@pytest.mark.serial
def test_async_exec_calls_run_side_by_side_and_batch(server, protocol):
    before = _batched_executions(_stats(server, "ens_double"))
    x = np.array([[1, 1]], np.float32)
    y, info = _bls(server, protocol, x, target="ens_double", mode="async", count=4)
    np.testing.assert_array_equal(y, 2 * x)
    assert info["sums"] == [4.0, 8.0, 12.0, 16.0]  # each call got its own answer
    # ens_double sleeps 20 ms per batch after a 20 ms queue delay: 4 calls one after the
    # other take 160 ms or more; side by side they share one batch.
    assert info["elapsed"] < 0.15, info
    assert _batched_executions(_stats(server, "ens_double")) > before


def test_bls_to_an_ensemble(server, protocol):
    x = np.array([[1, 2]], np.float32)
    y, _ = _bls(server, protocol, x, target="ens_two_step")
    np.testing.assert_array_equal(y, 4 * x)


def test_bls_requests_from_several_instances_batch_together(server):
    before = _batched_executions(_stats(server, "ens_double"))
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        futures = [
            pool.submit(_bls, server, "http", np.full((1, 2), v, np.float32), target="ens_double")
            for v in range(8)
        ]
        for v, future in enumerate(futures):
            y, _ = future.result(60)
            np.testing.assert_array_equal(y, np.full((1, 2), 2 * v, np.float32))
    assert _batched_executions(_stats(server, "ens_double")) > before


def test_errors_come_back_as_response_errors(server, protocol):
    x = np.array([[1]], np.float32)
    with pytest.raises(InferenceServerException) as unknown:
        _bls(server, protocol, x, target="no_such_model")
    assert "Request for unknown model: 'no_such_model' is not found" in unknown.value.message()
    with pytest.raises(InferenceServerException) as failed:
        _bls(server, protocol, -x, target="ens_double")
    assert "negative input is not allowed" in failed.value.message()
    # The instance is fine afterwards.
    y, _ = _bls(server, protocol, x, target="ens_double")
    np.testing.assert_array_equal(y, 2 * x)


def test_timeout_is_a_response_error(server):
    x = np.array([[1]], np.float32)
    start = time.monotonic()
    with pytest.raises(InferenceServerException) as expired:
        _bls(server, "http", x, target="ens_slow_inc", timeout_us=100_000)
    assert "Request timeout expired" in expired.value.message()
    assert time.monotonic() - start < 0.45  # ens_slow_inc takes 0.5 s


def test_model_calling_itself_gets_an_error_not_a_hang(server, protocol):
    x = np.array([2], np.float32)
    start = time.monotonic()
    with pytest.raises(InferenceServerException) as deadlock:
        _bls(server, protocol, x, model="bls_self")
    assert "deadlock" in deadlock.value.message()
    assert "from model 'bls_self' to model 'bls_self'" in deadlock.value.message()
    assert time.monotonic() - start < 10
    y, _ = _bls(server, protocol, np.array([0], np.float32), model="bls_self")  # no BLS
    np.testing.assert_array_equal(y, [0])


def test_two_models_calling_each_other_with_all_instances_busy(server, protocol):
    x = np.array([3], np.float32)
    with pytest.raises(InferenceServerException) as deadlock:
        _bls(server, protocol, x, model="bls_ping")
    assert "from model 'bls_pong' to model 'bls_ping'" in deadlock.value.message()
    # One hop is fine: ping calls pong, pong answers without calling back.
    y, _ = _bls(server, protocol, np.array([1], np.float32), model="bls_ping")
    np.testing.assert_array_equal(y, [0])


def test_is_model_ready_from_model_code(server):
    x = np.array([[1]], np.float32)
    _, ready = _bls(server, "http", x, target="ens_double", mode="ready")
    _, unknown = _bls(server, "http", x, target="no_such_model", mode="ready")
    assert ready == {"ready": True}
    assert unknown == {"ready": False}


def test_load_and_unload_model_from_model_code(server):
    # pb_utils.load_model / unload_model go through the repository API (explicit mode).
    x = np.array([[1]], np.float32)
    client = httpclient.InferenceServerClient(server.http_url)
    assert not client.is_model_ready("ens_add")
    _, loaded = _bls(server, "http", x, target="ens_add", mode="load")
    assert loaded == {"ready": True}
    assert client.is_model_ready("ens_add")
    _, unloaded = _bls(server, "http", x, target="ens_add", mode="unload")
    assert unloaded == {"ready": False}
    assert not client.is_model_ready("ens_add")
    with pytest.raises(InferenceServerException, match="failed to poll from model repository"):
        _bls(server, "http", x, target="no_such_model", mode="load")
    # Issue 29: model code's loads are logged with Triton's life-cycle lines too.
    assert server.wait_for_log(r"successfully unloaded 'ens_add' version 1")
    assert "successfully loaded 'ens_add'" in server.log


def test_bench_bls_add_sub(server, protocol):
    module, client = _client(server, protocol)
    try:
        a = np.array([1, 2, 3, 4], np.float32)
        b = np.array([4, 3, 2, 1], np.float32)
        inputs = [
            module.InferInput("INPUT0", [4], "FP32"),
            module.InferInput("INPUT1", [4], "FP32"),
        ]
        inputs[0].set_data_from_numpy(a)
        inputs[1].set_data_from_numpy(b)
        result = client.infer("bls_add_sub", inputs)
        np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), a + b)
        np.testing.assert_array_equal(result.as_numpy("OUTPUT1"), a - b)
    finally:
        client.close()


def test_large_tensors_travel_through_shared_memory(server):
    # 256 KiB each way: more than travels inside a call record (64 KiB).
    x = np.arange(65536, dtype=np.float32).reshape(1, -1)
    y, info = _bls(server, "http", x, target="ens_double")
    np.testing.assert_array_equal(y, 2 * x)
    y, info = _bls(server, "http", x, target="ens_double", mode="async", count=3)
    assert info["sums"] == [float((2 * (x + i)).sum()) for i in range(3)]
