"""The rate limiter in a real server, through tritonclient: ``--rate-limit=execution_count
--rate-limit-resource=R1:1`` over tests/rate_limit_models, where every model's instance
needs the one copy of R1.

A request to ``rl_hold`` with MS < 0 holds R1 until the test creates its gate file, so the
others queue for certain (the pending-request metric says when) before it lets go: then
the order they ran in and the absence of overlap are facts, not timings. An explicit load of
a model needing more copies than listed answers 400 with Triton's text.
"""

from __future__ import annotations

import re
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from tritium.testing import ServerProcess

MODELS = Path(__file__).resolve().parents[1] / "rate_limit_models"
REFUSAL = (
    'Resource count for "R1" is limited to 1 which will prevent scheduling of one or more '
    "model instances, the minimum required count is 2"
)
WAIT_S = 60.0


@pytest.fixture(scope="module")
def server() -> Iterator[ServerProcess]:
    args = [
        "--exit-on-error=false",
        "--strict-readiness=false",
        "--rate-limit=execution_count",
        "--rate-limit-resource=R1:1",
    ]
    with ServerProcess([MODELS], args, metrics=True) as s:
        yield s


@pytest.fixture(scope="module")
def http(server: ServerProcess) -> Iterator[httpclient.InferenceServerClient]:
    with httpclient.InferenceServerClient(server.http_url, concurrency=16) as client:
        yield client


def _inputs(ms: int, gate: str = "", batched: bool = False) -> list[httpclient.InferInput]:
    shape = [1, 1] if batched else [1]
    ms_in = httpclient.InferInput("MS", shape, "INT32")
    ms_in.set_data_from_numpy(np.array([ms], np.int32).reshape(shape))
    gate_in = httpclient.InferInput("GATE", shape, "BYTES")
    gate_in.set_data_from_numpy(np.array([gate.encode()], np.object_).reshape(shape))
    return [ms_in, gate_in]


def _pending(server: ServerProcess) -> dict[str, int]:
    with urllib.request.urlopen(server.metrics_url, timeout=10) as reply:
        text = reply.read().decode()
    found = re.findall(
        r'nv_inference_pending_request_count\{model="(\w+)",version="1"\} (\d+)', text
    )
    return {model: int(n) for model, n in found}


def _wait_for(condition: Any, what: str) -> None:
    deadline = time.monotonic() + WAIT_S
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


class _Gate:
    """A request to ``rl_hold`` that holds R1 until ``open()``."""

    def __init__(self, http: httpclient.InferenceServerClient, tmp_path: Path) -> None:
        self.path = tmp_path / "gate"
        self.reply = http.async_infer("rl_hold", _inputs(-1, str(self.path)))
        started = tmp_path / "gate.started"
        _wait_for(started.exists, "rl_hold to hold R1")

    def open(self) -> np.ndarray:
        self.path.touch()
        return self.reply.get_result(timeout=WAIT_S).as_numpy("SPAN")


def _stats(http: httpclient.InferenceServerClient, model: str) -> dict[str, Any]:
    return http.get_inference_statistics(model)["model_stats"][0]


def test_a_model_needing_more_than_listed_is_refused_with_tritons_reason(
    http: httpclient.InferenceServerClient,
) -> None:
    index = {m["name"]: m for m in http.get_model_repository_index()}
    assert index["rl_big"]["state"] == "UNAVAILABLE"
    assert REFUSAL in index["rl_big"]["reason"]
    # An ensemble whose step needs more than exists fails at load: nothing can deadlock.
    assert index["rl_pipeline_big"]["state"] == "UNAVAILABLE"
    for model in ("rl_hold", "rl_high", "rl_low", "rl_batched", "rl_pipeline", "rl_bls"):
        assert index[model]["state"] == "READY", index[model]


def test_priority_1_runs_before_priority_10_and_the_wait_counts_as_queue_time(
    server: ServerProcess, http: httpclient.InferenceServerClient, tmp_path: Path
) -> None:
    low_before = _stats(http, "rl_low")["inference_stats"]["queue"]
    gate = _Gate(http, tmp_path)
    low = [http.async_infer("rl_low", _inputs(10)) for _ in range(3)]
    _wait_for(lambda: _pending(server).get("rl_low") == 3, "three rl_low requests to queue")
    high = [http.async_infer("rl_high", _inputs(10)) for _ in range(3)]
    _wait_for(lambda: _pending(server).get("rl_high") == 3, "three rl_high requests to queue")
    held = gate.open()
    spans = [("high", r.get_result(timeout=WAIT_S).as_numpy("SPAN")) for r in high]
    spans += [("low", r.get_result(timeout=WAIT_S).as_numpy("SPAN")) for r in low]
    order = [name for name, span in sorted(spans, key=lambda s: int(s[1][0]))]
    assert order == ["high"] * 3 + ["low"] * 3
    # R1 has one copy: no run overlaps another, across the three models.
    intervals = sorted([(int(held[0]), int(held[1]))] + [(int(s[0]), int(s[1])) for _, s in spans])
    for (_, end), (start, _) in zip(intervals, intervals[1:]):
        assert start >= end
    # The wait for R1 is queue time (as Triton reports it): the low requests waited for
    # the gate and the high ones at least.
    queue = _stats(http, "rl_low")["inference_stats"]["queue"]
    assert queue["count"] == low_before["count"] + 3
    # Each arrived before the gate opened and was handed to its instance after the last
    # high request ended.
    last_high_end = max(int(s[1]) for name, s in spans if name == "high")
    waited_at_least = 3 * (last_high_end - int(held[1]))
    assert queue["ns"] - low_before["ns"] >= waited_at_least > 0


def test_dynamic_batching_ensembles_and_bls_wait_for_the_resource(
    server: ServerProcess, http: httpclient.InferenceServerClient, tmp_path: Path
) -> None:
    before = _stats(http, "rl_batched")
    gate = _Gate(http, tmp_path)
    batched = [http.async_infer("rl_batched", _inputs(1, batched=True)) for _ in range(4)]
    pipeline = http.async_infer("rl_pipeline", _inputs(1))
    bls = http.async_infer("rl_bls", _inputs(1))
    _wait_for(
        lambda: _pending(server).get("rl_batched") == 4 and _pending(server).get("rl_high") == 2,
        "the batched requests, the pipeline's first step and the BLS call to queue",
    )
    held = gate.open()
    for reply in batched:
        span = reply.get_result(timeout=WAIT_S).as_numpy("SPAN")
        assert int(span[0][0]) >= int(held[1])
    for reply in (pipeline, bls):
        span = reply.get_result(timeout=WAIT_S).as_numpy("SPAN")
        assert int(span[0]) >= int(held[1])
    after = _stats(http, "rl_batched")
    # The four queued requests could form batches while R1 was held.
    assert after["inference_count"] - before["inference_count"] == 4
    assert after["execution_count"] - before["execution_count"] < 4


def test_many_requests_to_models_sharing_the_resource_all_complete(
    http: httpclient.InferenceServerClient,
) -> None:
    replies = [http.async_infer(m, _inputs(0)) for m in ("rl_high", "rl_low", "rl_pipeline") * 10]
    for reply in replies:
        assert reply.get_result(timeout=WAIT_S).as_numpy("SPAN") is not None


def test_an_explicit_load_of_a_model_needing_more_answers_400_with_tritons_text() -> None:
    args = [
        "--model-control-mode=explicit",
        "--rate-limit=execution_count",
        "--rate-limit-resource=R1:1",
    ]
    with ServerProcess([MODELS], args) as server:
        with httpclient.InferenceServerClient(server.http_url) as client:
            for model in ("rl_big", "rl_pipeline_big"):
                with pytest.raises(InferenceServerException) as caught:
                    client.load_model(model)
                assert caught.value.status() == "400"
                assert REFUSAL in caught.value.message()
            client.load_model("rl_high")  # needs one copy: loads
            assert client.is_model_ready("rl_high")
