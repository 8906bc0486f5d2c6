"""``/metrics`` of a real server under known traffic, parsed with ``prometheus_client``.

Each test reads the page before and after its traffic and checks exact deltas: every
counter, each failure reason, summary counts, custom metrics of each kind. Triton's
names, help texts and labels are pinned against what ``tritonserver`` 2.51 prints.
"""

from __future__ import annotations

import json
import threading
import time
import urllib.request
from collections.abc import Iterator

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from prometheus_client.parser import text_string_to_metric_families
from tritonclient.utils import InferenceServerException

from tritium.testing import ServerProcess

from .conftest import EXAMPLE_MODELS, TEST_MODELS

MODELS = ("add_sub", "faulty", "sleeper", "batch_limits", "cancellable", "custom_metrics")

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


@pytest.fixture(scope="module")
def server() -> Iterator[ServerProcess]:
    args = [
        "--model-control-mode=explicit",
        *(f"--load-model={m}" for m in MODELS),
        "--metrics-config=summary_latencies=true",
        "--metrics-interval-ms=100",
    ]
    with ServerProcess([TEST_MODELS, EXAMPLE_MODELS], args, grpc=True, metrics=True) as s:
        yield s


@pytest.fixture(scope="module")
def http(server: ServerProcess) -> Iterator[httpclient.InferenceServerClient]:
    with httpclient.InferenceServerClient(server.http_url, concurrency=8) as client:
        yield client


def page(server: ServerProcess, timeout: float = 10.0) -> tuple[str, str]:
    with urllib.request.urlopen(server.metrics_url, timeout=timeout) as reply:
        return reply.headers["Content-Type"], reply.read().decode()


def scrape(server: ServerProcess) -> Samples:
    _, text = page(server)
    samples: Samples = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            # prometheus_client names every counter sample "<name>_total"; Triton's counters
            # have no such suffix, so key counters by the name without it.
            name = sample.name.removesuffix("_total") if family.type == "counter" else sample.name
            samples[(name, frozenset(sample.labels.items()))] = sample.value
    return samples


def value(samples: Samples, name: str, model: str | None = None, **labels: str) -> float:
    if model is not None:
        labels = {"model": model, "version": "1", **labels}
    return samples[(name, frozenset(labels.items()))]


def delta(before: Samples, after: Samples, name: str, model: str, **labels: str) -> float:
    return value(after, name, model, **labels) - value(before, name, model, **labels)


def add_sub_inputs() -> list[httpclient.InferInput]:
    inputs = []
    for name in ("INPUT0", "INPUT1"):
        tensor = httpclient.InferInput(name, [4], "FP32")
        tensor.set_data_from_numpy(np.arange(4, dtype=np.float32))
        inputs.append(tensor)
    return inputs


def faulty_inputs(mode: str) -> list[httpclient.InferInput]:
    tensor = httpclient.InferInput("MODE", [1], "BYTES")
    tensor.set_data_from_numpy(np.array([mode.encode()], dtype=np.object_))
    return [tensor]


def model_stats(client: httpclient.InferenceServerClient, model: str) -> dict:
    return client.get_inference_statistics(model)["model_stats"][0]


# ------------------------------------------------------------------ names and format


def test_triton_names_help_and_types(server: ServerProcess) -> None:
    content_type, text = page(server)
    assert content_type.startswith("text/plain; version=0.0.4")
    families = {f.name: f for f in text_string_to_metric_families(text)}
    expected = {
        "nv_inference_request_success": ("counter", "Number of successful inference requests, all batch sizes"),
        "nv_inference_request_failure": ("counter", "Number of failed inference requests, all batch sizes"),
        "nv_inference_count": ("counter", "Number of inferences performed (does not include cached requests)"),
        "nv_inference_exec_count": ("counter", "Number of model executions performed (does not include cached requests)"),
        "nv_inference_request_duration_us": ("counter", "Cumulative inference request duration in microseconds (includes cached requests)"),
        "nv_inference_queue_duration_us": ("counter", "Cumulative inference queuing duration in microseconds (includes cached requests)"),
        "nv_inference_compute_input_duration_us": ("counter", "Cumulative compute input duration in microseconds (does not include cached requests)"),
        "nv_inference_compute_infer_duration_us": ("counter", "Cumulative compute inference duration in microseconds (does not include cached requests)"),
        "nv_inference_compute_output_duration_us": ("counter", "Cumulative inference compute output duration in microseconds (does not include cached requests)"),
        "nv_inference_pending_request_count": ("gauge", "Instantaneous number of pending requests awaiting execution per-model."),
        "nv_cpu_utilization": ("gauge", "CPU utilization rate [0.0 - 1.0]"),
        "nv_cpu_memory_total_bytes": ("gauge", "CPU total memory (RAM), in bytes"),
        "nv_cpu_memory_used_bytes": ("gauge", "CPU used memory (RAM), in bytes"),
        "nv_inference_request_summary_us": ("summary", "Summary of inference request duration in microseconds (includes cached requests)"),
        "nv_inference_queue_summary_us": ("summary", "Summary of inference queuing duration in microseconds (includes cached requests)"),
    }
    for name, (kind, help_text) in expected.items():
        assert f"# HELP {name} {help_text}\n# TYPE {name} {kind}\n" in text, name
        assert name in families or name.removesuffix("_total") in families
    for model in MODELS:
        for reason in ("REJECTED", "CANCELED", "BACKEND", "OTHER"):
            assert f'nv_inference_request_failure{{model="{model}",reason="{reason}",version="1"}}' in text


def test_cpu_and_memory_gauges(server: ServerProcess) -> None:
    samples = scrape(server)
    assert 0.0 <= value(samples, "nv_cpu_utilization") <= 1.0
    total = value(samples, "nv_cpu_memory_total_bytes")
    assert 0 < value(samples, "nv_cpu_memory_used_bytes") <= total


# ------------------------------------------------------------------ exact deltas


def test_success_counters_match_the_statistics_extension(server, http) -> None:
    before = scrape(server)
    for _ in range(3):
        http.infer("add_sub", add_sub_inputs())
    after = scrape(server)
    stats = model_stats(http, "add_sub")
    for name in ("nv_inference_request_success", "nv_inference_count", "nv_inference_exec_count"):
        assert delta(before, after, name, "add_sub") == 3, name
    for reason in ("REJECTED", "CANCELED", "BACKEND", "OTHER"):
        assert delta(before, after, "nv_inference_request_failure", "add_sub", reason=reason) == 0
    # One source of truth: the page and the statistics extension give the same numbers.
    inference = stats["inference_stats"]
    assert value(after, "nv_inference_request_success", "add_sub") == inference["success"]["count"]
    assert value(after, "nv_inference_count", "add_sub") == stats["inference_count"]
    assert value(after, "nv_inference_exec_count", "add_sub") == stats["execution_count"]
    for name, key in (
        ("nv_inference_request_duration_us", "success"),
        ("nv_inference_queue_duration_us", "queue"),
        ("nv_inference_compute_input_duration_us", "compute_input"),
        ("nv_inference_compute_infer_duration_us", "compute_infer"),
        ("nv_inference_compute_output_duration_us", "compute_output"),
    ):
        assert value(after, name, "add_sub") == inference[key]["ns"] // 1000, name
    assert delta(before, after, "nv_inference_request_duration_us", "add_sub") > 0


def test_summary_counts_follow_the_counters(server, http) -> None:
    before = scrape(server)
    for _ in range(4):
        http.infer("add_sub", add_sub_inputs())
    after = scrape(server)
    for name in ("nv_inference_request_summary_us", "nv_inference_queue_summary_us"):
        assert delta(before, after, name + "_count", "add_sub") == 4, name
    for name in ("compute_input", "compute_infer", "compute_output"):
        assert delta(before, after, f"nv_inference_{name}_summary_us_count", "add_sub") == 4
    assert value(after, "nv_inference_request_summary_us_sum", "add_sub") == value(
        after, "nv_inference_request_duration_us", "add_sub"
    )
    p50 = value(after, "nv_inference_request_summary_us", "add_sub", quantile="0.5")
    p999 = value(after, "nv_inference_request_summary_us", "add_sub", quantile="0.999")
    assert 0 < p50 <= p999


def test_backend_failures(server, http) -> None:
    before = scrape(server)
    for mode in ("raise", "error", "error"):
        with pytest.raises(InferenceServerException):
            http.infer("faulty", faulty_inputs(mode))
    http.infer("faulty", faulty_inputs("ok"))
    after = scrape(server)
    assert delta(before, after, "nv_inference_request_failure", "faulty", reason="BACKEND") == 3
    for reason in ("REJECTED", "CANCELED", "OTHER"):
        assert delta(before, after, "nv_inference_request_failure", "faulty", reason=reason) == 0
    assert delta(before, after, "nv_inference_request_success", "faulty") == 1
    stats = model_stats(http, "faulty")["inference_stats"]
    failed = sum(
        value(after, "nv_inference_request_failure", "faulty", reason=r)
        for r in ("REJECTED", "CANCELED", "BACKEND", "OTHER")
    )
    assert failed == stats["fail"]["count"]


def test_a_crashed_instance_is_a_backend_failure(server, http) -> None:
    before = scrape(server)
    with pytest.raises(InferenceServerException):
        http.infer("faulty", faulty_inputs("crash"))
    after = scrape(server)
    assert delta(before, after, "nv_inference_request_failure", "faulty", reason="BACKEND") == 1
    assert delta(before, after, "nv_inference_request_failure", "faulty", reason="OTHER") == 0
    deadline = time.monotonic() + 60
    while not http.is_model_ready("faulty") and time.monotonic() < deadline:
        time.sleep(0.1)
    assert http.is_model_ready("faulty")


def test_invalid_requests_are_not_counted(server, http) -> None:
    # Like Triton: a request refused before it reaches the model's scheduler is no failure.
    before = scrape(server)
    bad = httpclient.InferInput("INPUT0", [3], "FP32")
    bad.set_data_from_numpy(np.zeros(3, np.float32))
    with pytest.raises(InferenceServerException):
        http.infer("add_sub", [bad, add_sub_inputs()[1]])
    after = scrape(server)
    for reason in ("REJECTED", "CANCELED", "BACKEND", "OTHER"):
        assert delta(before, after, "nv_inference_request_failure", "add_sub", reason=reason) == 0


def test_rejected_when_the_queue_is_full(server, http) -> None:
    x = httpclient.InferInput("X", [1, 1], "INT32")
    x.set_data_from_numpy(np.ones((1, 1), np.int32))
    before = scrape(server)
    slow = http.async_infer("batch_limits", [x], parameters={"sleep_ms": 3000})
    time.sleep(0.5)  # the slow request is running now: the queue (2 places) fills at once
    pending = [http.async_infer("batch_limits", [x]) for _ in range(6)]
    rejected = 0
    for request in pending:
        try:
            request.get_result()
        except InferenceServerException as exc:
            assert "Exceeds maximum queue size" in str(exc)
            rejected += 1
    slow.get_result()
    after = scrape(server)
    assert rejected >= 1
    assert delta(before, after, "nv_inference_request_failure", "batch_limits", reason="REJECTED") == rejected
    assert delta(before, after, "nv_inference_request_success", "batch_limits") == 7 - rejected


def test_canceled_when_the_client_gives_up(server) -> None:
    before = scrape(server)
    tag = grpcclient.InferInput("TAG", [1], "BYTES")
    tag.set_data_from_numpy(np.array([b"metrics"], dtype=np.object_))
    with grpcclient.InferenceServerClient(server.grpc_url) as client:
        with pytest.raises(InferenceServerException):
            client.infer("cancellable", [tag], client_timeout=0.5)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        after = scrape(server)
        if delta(before, after, "nv_inference_request_failure", "cancellable", reason="CANCELED"):
            break
        time.sleep(0.05)
    assert delta(before, after, "nv_inference_request_failure", "cancellable", reason="CANCELED") == 1
    assert delta(before, after, "nv_inference_request_failure", "cancellable", reason="BACKEND") == 0


# ------------------------------------------------------------------ busy server


def test_page_answers_while_every_instance_is_busy(server, http) -> None:
    ms = httpclient.InferInput("MS", [1], "INT32")
    ms.set_data_from_numpy(np.array([3000], np.int32))
    started = time.monotonic()
    # Three instances, four requests: all instances sleep and one request waits.
    calls = [http.async_infer("sleeper", [ms]) for _ in range(4)]
    seen_pending = 0.0
    latencies = []
    while time.monotonic() - started < 2.0:
        t0 = time.monotonic()
        samples = scrape(server)
        latencies.append(time.monotonic() - t0)
        seen_pending = max(seen_pending, value(samples, "nv_inference_pending_request_count", "sleeper"))
        time.sleep(0.05)
    for call in calls:
        call.get_result()
    assert seen_pending == 1
    # Far less than the 3 s each instance is busy for: the page never waits on them.
    assert max(latencies) < 1.5, latencies
    assert value(scrape(server), "nv_inference_pending_request_count", "sleeper") == 0


def test_concurrent_scrapes_and_keep_alive(server) -> None:
    errors: list[BaseException] = []

    def scrape_many() -> None:
        try:
            for _ in range(5):
                scrape(server)
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=scrape_many) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert not errors
    import http.client

    conn = http.client.HTTPConnection("127.0.0.1", server.metrics_port, timeout=10)
    for _ in range(3):  # one connection, several scrapes
        conn.request("GET", "/metrics")
        reply = conn.getresponse()
        assert reply.status == 200 and b"nv_inference_count" in reply.read()
    conn.request("GET", "/nothing")
    reply = conn.getresponse()
    reply.read()
    assert reply.status == 404
    conn.close()


# ------------------------------------------------------------------ custom metrics


def custom_inputs(x: float) -> list[httpclient.InferInput]:
    tensor = httpclient.InferInput("X", [1], "FP32")
    tensor.set_data_from_numpy(np.array([x], np.float32))
    return [tensor]


def test_custom_metrics_of_each_kind(server, http) -> None:
    counter_labels = {"model": "custom_metrics", "note": 'a "quoted"\nvalue'}
    before = scrape(server)
    values = [0.5, 1.5, 7.0, 2.0]
    for x in values:
        http.infer("custom_metrics", custom_inputs(x))
    after = scrape(server)
    counter = ("custom_requests", frozenset(counter_labels.items()))
    assert after[counter] - before.get(counter, 0) == 4
    assert after[("custom_last_x", frozenset())] == 2.0
    hist = {"unit": "none"}

    def h(suffix: str, **extra: str) -> float:
        key = ("custom_x" + suffix, frozenset({**hist, **extra}.items()))
        return after[key] - before.get(key, 0)

    assert h("_count") == 4
    assert h("_sum") == sum(values)
    assert h("_bucket", le="1") == 1
    assert h("_bucket", le="2") == 3  # 2.0 falls in le="2"
    assert h("_bucket", le="5") == 3
    assert h("_bucket", le="+Inf") == 4
    _, text = page(server)
    assert '# HELP custom_requests_total Requests seen by "custom_metrics"' in text
    assert "# TYPE custom_x histogram" in text


def test_custom_metrics_add_up_across_instances(server, http) -> None:
    # Two instances each count their own requests; the page shows the sum.
    counter = (
        "custom_requests",
        frozenset({"model": "custom_metrics", "note": 'a "quoted"\nvalue'}.items()),
    )
    before = scrape(server).get(counter, 0)
    calls = [http.async_infer("custom_metrics", custom_inputs(1.0)) for _ in range(12)]
    for call in calls:
        call.get_result()
    assert scrape(server)[counter] - before == 12


def test_invalid_custom_metric_name_is_a_model_error(server, http) -> None:
    with pytest.raises(InferenceServerException, match="Invalid metric name 'bad-name'"):
        http.infer("custom_metrics", custom_inputs(-1.0))


def test_statistics_json_still_parses(http) -> None:
    # The failure split is metrics-only: the statistics extension keeps Triton's shape.
    stats = model_stats(http, "faulty")
    assert set(stats["inference_stats"]) >= {"success", "fail", "queue"}
    json.dumps(stats)
