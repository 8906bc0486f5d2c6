"""``nv_inference_first_response_histogram_ms`` with ``--metrics-config
histogram_latencies=true``: exact counts per bucket for a decoupled model under known
delays (over gRPC streams and HTTP ``generate_stream``), nothing for models that are not
decoupled, and no family at all with the option off. Parsed with ``prometheus_client``."""

from __future__ import annotations

import json
import queue
import urllib.request
from collections.abc import Iterator
from functools import partial

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
from prometheus_client.parser import text_string_to_metric_families

from tritium.testing import ServerProcess

from .conftest import EXAMPLE_MODELS

FAMILY = "nv_inference_first_response_histogram_ms"
MODELS = ("--model-control-mode=explicit", "--load-model=word_stream", "--load-model=add_sub")


@pytest.fixture(scope="module")
def server() -> Iterator[ServerProcess]:
    args = [*MODELS, "--metrics-config=histogram_latencies=true"]
    with ServerProcess([EXAMPLE_MODELS], args, grpc=True, metrics=True) as s:
        yield s


def histogram(server: ServerProcess) -> tuple[str, dict[tuple[str, str, str], float]]:
    """(help text, {(sample name, model, le): value}) of the family."""
    with urllib.request.urlopen(server.metrics_url, timeout=10) as reply:
        text = reply.read().decode()
    for family in text_string_to_metric_families(text):
        if family.name == FAMILY:
            assert family.type == "histogram"
            samples = {
                (s.name, s.labels["model"], s.labels.get("le", "")): s.value
                for s in family.samples
            }
            assert all(s.labels["version"] == "1" for s in family.samples)
            return family.documentation, samples
    raise AssertionError(f"{FAMILY} is not on the page")


def generate_stream(server: ServerProcess, delay_ms: int) -> int:
    """One HTTP generate_stream request of two words; the number of events read."""
    body = {"text_input": "hi", "parameters": {"max_tokens": 2, "delay_ms": delay_ms}}
    url = f"http://{server.http_url}/v2/models/word_stream/generate_stream"
    request = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST")
    with urllib.request.urlopen(request, timeout=30) as reply:
        return sum(1 for line in reply.read().splitlines() if line.startswith(b"data: "))


def grpc_stream(server: ServerProcess, delay_ms: int) -> int:
    results: queue.Queue[object] = queue.Queue()
    tensor = grpcclient.InferInput("text_input", [1], "BYTES")
    tensor.set_data_from_numpy(np.array([b"hi"], dtype=np.object_))
    with grpcclient.InferenceServerClient(server.grpc_url) as client:
        client.start_stream(callback=partial(lambda q, result, error: q.put(error or result), results))
        client.async_stream_infer(
            "word_stream", [tensor], parameters={"max_tokens": 2, "delay_ms": delay_ms}
        )
        got = [results.get(timeout=30) for _ in range(2)]
        client.stop_stream()
    assert all(isinstance(r, grpcclient.InferResult) for r in got), got
    return len(got)


def test_first_responses_are_counted_per_bucket(server: ServerProcess) -> None:
    help_text, before = histogram(server)
    assert help_text == "Duration from request to first response in milliseconds"
    assert set(before) == {
        *((f"{FAMILY}_bucket", "word_stream", le) for le in ("100", "500", "2000", "5000", "+Inf")),
        (f"{FAMILY}_count", "word_stream", ""),
        (f"{FAMILY}_sum", "word_stream", ""),
    }
    assert before[(f"{FAMILY}_count", "word_stream", "")] == 0
    # Two quick requests and two whose first word comes after 600 ms, each request two
    # responses: only the first of each is observed.
    assert grpc_stream(server, 0) == 2
    assert generate_stream(server, 0) == 2
    assert grpc_stream(server, 600) == 2
    assert generate_stream(server, 600) == 2
    _, after = histogram(server)

    def delta(name: str, le: str = "") -> float:
        key = (f"{FAMILY}_{name}", "word_stream", le)
        return after[key] - before[key]

    assert delta("count") == 4
    assert delta("bucket", "+Inf") == 4
    assert delta("bucket", "500") == 2  # the quick ones (well under 500 ms)
    assert delta("bucket", "2000") == 4  # the slow ones: at least 600 ms, not seconds
    assert delta("bucket", "5000") == 4
    assert 1200 <= delta("sum") < 2000  # whole milliseconds


def test_off_by_default() -> None:
    with ServerProcess([EXAMPLE_MODELS], list(MODELS), metrics=True) as server:
        assert generate_stream(server, 0) == 2
        with urllib.request.urlopen(server.metrics_url, timeout=10) as reply:
            assert FAMILY not in reply.read().decode()
