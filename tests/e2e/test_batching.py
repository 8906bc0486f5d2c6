"""Dynamic batching through a real server: merging, queue limits, timeouts (Triton's texts)."""

from __future__ import annotations

import concurrent.futures
import time

import numpy as np
import pytest
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException


def _call(url: str, model: str, value: int, timeout_us: int | None = None, **params):
    client = httpclient.InferenceServerClient(url, network_timeout=60)
    inp = httpclient.InferInput("X", [1, 1], "INT32")
    inp.set_data_from_numpy(np.array([[value]], np.int32))
    try:
        result = client.infer(model, [inp], parameters=params or None, timeout=timeout_us)
        return int(result.as_numpy("Y")[0, 0]), int(result.as_numpy("BATCH")[0, 0])
    finally:
        client.close()


def test_concurrent_requests_are_merged_and_answered_individually(server, http_client):
    before = http_client.get_inference_statistics("batch_merge")["model_stats"][0]
    n = 8
    with concurrent.futures.ThreadPoolExecutor(n) as pool:
        results = list(pool.map(lambda v: _call(server.http_url, "batch_merge", v), range(100, 100 + n)))
    assert [y for y, _ in results] == list(range(100, 100 + n))
    assert max(b for _, b in results) > 1
    after = http_client.get_inference_statistics("batch_merge")["model_stats"][0]
    executions = after["execution_count"] - before["execution_count"]
    inferences = after["inference_count"] - before["inference_count"]
    assert inferences == n
    assert executions < n
    sizes = {b["batch_size"] for b in after["batch_stats"]}
    assert max(sizes) > 1


def test_queue_full_and_timeout_rejections_carry_triton_messages(server):
    url = server.http_url
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        busy = pool.submit(_call, url, "batch_limits", 1, sleep_ms=1500)
        time.sleep(0.3)  # executing now; the queue (max 2) is empty
        short = pool.submit(_call, url, "batch_limits", 2, timeout_us=500_000)  # 500 ms < 5 s
        queued = pool.submit(_call, url, "batch_limits", 3)
        time.sleep(0.15)  # both queued, the queue is full
        with pytest.raises(InferenceServerException) as full:
            _call(url, "batch_limits", 4)
        assert full.value.status() == "503"
        assert "Exceeds maximum queue size" in full.value.message()
        assert busy.result(30) == (1, 1)
        with pytest.raises(InferenceServerException) as expired:
            short.result(30)
        assert expired.value.status() == "503"
        assert "Request timeout expired" in expired.value.message()
        assert queued.result(30) == (3, 1)
