"""The trace extension: settings over HTTP and gRPC (global and per model, Triton's texts
and codes), ``--trace-config``, and the trace file Triton writes at TIMESTAMPS level."""

from __future__ import annotations

import json
import queue
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from tritium.testing import ServerProcess

from .conftest import EXAMPLE_MODELS

ORDER = [
    "REQUEST_START",
    "QUEUE_START",
    "COMPUTE_START",
    "COMPUTE_INPUT_END",
    "COMPUTE_OUTPUT_START",
    "COMPUTE_END",
    "REQUEST_END",
]


def call(url: str, body: object | None = None) -> tuple[int, object]:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, method="GET" if body is None else "POST")
    try:
        with urllib.request.urlopen(request, timeout=10) as reply:
            return reply.status, json.loads(reply.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def launch(trace_file: Path, *config: str) -> ServerProcess:
    args = [
        f"--trace-config=triton,file={trace_file}",
        *(f"--trace-config={c}" for c in config),
        "--model-control-mode=explicit",
        "--load-model=add_sub",
        "--load-model=identity",
        "--load-model=word_stream",
    ]
    return ServerProcess([EXAMPLE_MODELS], args, grpc=True)


@pytest.fixture(scope="module")
def trace_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("traces")


@pytest.fixture(scope="module")
def server(trace_dir: Path) -> Iterator[ServerProcess]:
    with launch(trace_dir / "trace.json", "level=TIMESTAMPS", "rate=1", "triton,log-frequency=1") as s:
        yield s


def infer(url: str, request_id: str = "") -> float:
    """One add_sub request; the seconds it took as the client saw it."""
    with httpclient.InferenceServerClient(url) as client:
        inputs = []
        for name in ("INPUT0", "INPUT1"):
            tensor = httpclient.InferInput(name, [4], "FP32")
            tensor.set_data_from_numpy(np.ones(4, np.float32))
            inputs.append(tensor)
        start = time.monotonic()
        client.infer("add_sub", inputs, request_id=request_id)
        return time.monotonic() - start


def read_traces(path: Path, timeout: float = 10.0) -> list[dict]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            return json.loads(path.read_text())
        except (FileNotFoundError, json.JSONDecodeError):
            time.sleep(0.05)
    raise AssertionError(f"no trace file {path}")


def by_id(entries: list[dict]) -> dict[int, dict]:
    traces: dict[int, dict] = {}
    for entry in entries:
        trace = traces.setdefault(entry["id"], {"stamps": []})
        if "timestamps" in entry:
            trace["stamps"] += [(t["name"], t["ns"]) for t in entry["timestamps"]]
        else:
            trace.update(entry)
    return traces


# ------------------------------------------------------------ the trace file


def test_trace_file_has_tritons_shape_and_ordered_timestamps(server, trace_dir) -> None:
    earlier = set(trace_dir.glob("trace.json.*"))
    with httpclient.InferenceServerClient(server.http_url) as client:
        before = client.get_inference_statistics("add_sub")["model_stats"][0]["inference_stats"]
        seconds = infer(server.http_url, "traced-1")
        after = client.get_inference_statistics("add_sub")["model_stats"][0]["inference_stats"]
    # The trace file is written off the event loop after the response: wait for it.
    deadline = time.monotonic() + 10.0
    while not set(trace_dir.glob("trace.json.*")) - earlier and time.monotonic() < deadline:
        time.sleep(0.02)
    files = sorted(set(trace_dir.glob("trace.json.*")) - earlier, key=lambda p: int(p.suffix[1:]))
    assert files, "no trace file was written for the request"
    entries = read_traces(files[-1])
    (trace,) = by_id(entries).values()
    assert entries[0] == {"id": trace["id"], "model_name": "add_sub", "model_version": 1, "request_id": "traced-1"}
    names = [name for name, _ in trace["stamps"]]
    assert names == ORDER
    ns = [value for _, value in trace["stamps"]]
    assert ns == sorted(ns)
    stamp = dict(trace["stamps"])
    total = stamp["REQUEST_END"] - stamp["REQUEST_START"]
    # The spans add up to the request's duration ...
    spans = [b - a for a, b in zip(ns, ns[1:])]
    assert sum(spans) == total
    # ... which is the duration the statistics counted (the trace ends a moment later)
    # and no more than the client waited.
    counted = after["success"]["ns"] - before["success"]["ns"]
    assert counted <= total < counted + 50_000_000
    assert total <= seconds * 1e9
    # Queue time is exactly the statistics' queue time; compute holds the model's time.
    assert stamp["COMPUTE_START"] - stamp["QUEUE_START"] == after["queue"]["ns"] - before["queue"]["ns"]
    infer_ns = after["compute_infer"]["ns"] - before["compute_infer"]["ns"]
    assert stamp["COMPUTE_OUTPUT_START"] - stamp["COMPUTE_INPUT_END"] >= infer_ns


def new_trace(trace_dir: Path, earlier: set[Path], timeout: float = 10.0) -> dict:
    """The one trace of the newest file written since ``earlier`` was listed."""
    deadline = time.monotonic() + timeout
    while not set(trace_dir.glob("trace.json.*")) - earlier and time.monotonic() < deadline:
        time.sleep(0.02)
    files = sorted(set(trace_dir.glob("trace.json.*")) - earlier, key=lambda p: int(p.suffix[1:]))
    assert files, "no trace file was written for the request"
    (trace,) = by_id(read_traces(files[-1])).values()
    return trace


def stream_words(url: str, request_id: str, words: int, delay_ms: int) -> None:
    """One word_stream request over a gRPC stream: ``words`` responses, ``delay_ms`` apart."""
    results: queue.Queue = queue.Queue()
    tensor = grpcclient.InferInput("text_input", [1], "BYTES")
    tensor.set_data_from_numpy(np.array([b"hi"], dtype=np.object_))
    with grpcclient.InferenceServerClient(url) as client:
        client.start_stream(callback=lambda result, error: results.put(error or result))
        client.async_stream_infer(
            "word_stream",
            [tensor],
            request_id=request_id,
            parameters={"max_tokens": words, "delay_ms": delay_ms},
        )
        got = [results.get(timeout=30) for _ in range(words)]
        client.stop_stream()
    assert all(isinstance(r, grpcclient.InferResult) for r in got), got


def test_a_decoupled_request_is_traced_until_its_final_response(server, trace_dir) -> None:
    earlier = set(trace_dir.glob("trace.json.*"))
    words, delay_ms = 3, 10
    sent_ns = time.monotonic_ns()
    stream_words(server.grpc_url, "streamed-1", words, delay_ms)
    trace = new_trace(trace_dir, earlier)
    assert (trace["model_name"], trace["model_version"], trace["request_id"]) == (
        "word_stream",
        1,
        "streamed-1",
    )
    assert [name for name, _ in trace["stamps"]] == ORDER
    ns = [value for _, value in trace["stamps"]]
    assert ns == sorted(ns)
    stamp = dict(trace["stamps"])
    # The server's clock is this machine's monotonic clock: the request started after it
    # was sent, and it lasts until the model's last word (each one delay_ms after the last).
    assert stamp["REQUEST_START"] >= sent_ns
    assert stamp["REQUEST_END"] - stamp["REQUEST_START"] >= words * delay_ms * 1_000_000
    assert stamp["COMPUTE_END"] - stamp["COMPUTE_START"] >= words * delay_ms * 1_000_000


def test_log_frequency_writes_one_file_per_trace(server, trace_dir) -> None:
    before = set(trace_dir.glob("trace.json.*"))
    for i in range(3):
        infer(server.http_url, f"each-{i}")
    deadline = time.monotonic() + 10
    while len(set(trace_dir.glob("trace.json.*")) - before) < 3 and time.monotonic() < deadline:
        time.sleep(0.05)
    new = sorted(set(trace_dir.glob("trace.json.*")) - before, key=lambda p: int(p.suffix[1:]))
    assert [by_id(read_traces(p)).popitem()[1]["request_id"] for p in new] == [f"each-{i}" for i in range(3)]


def test_rate_and_count_and_shutdown_file(tmp_path: Path) -> None:
    trace_file = tmp_path / "t.json"
    server = launch(trace_file, "level=TIMESTAMPS", "rate=2", "count=2").start()
    try:
        for i in range(8):
            infer(server.http_url, f"r{i}")
    finally:
        server.stop()
    # rate=2 traces every second request; count=2 stops after two; log-frequency 0 writes
    # everything to the trace file at shutdown.
    traces = by_id(read_traces(trace_file))
    assert [t["request_id"] for t in traces.values()] == ["r1", "r3"]


# ------------------------------------------------------------ settings


def test_http_settings_global_and_per_model(server, trace_dir) -> None:
    base = f"http://{server.http_url}/v2"
    status, start = call(base + "/trace/setting")
    assert status == 200 and start == {
        "trace_level": ["TIMESTAMPS"],
        "trace_rate": "1",
        "trace_count": "-1",
        "log_frequency": "1",
        "trace_file": str(trace_dir / "trace.json"),
        "trace_mode": "triton",
    }
    try:
        status, model = call(base + "/models/identity/trace/setting", {"trace_rate": "5", "trace_level": ["OFF"]})
        assert status == 200 and model == {**start, "trace_rate": "5", "trace_level": ["OFF"]}
        status, changed = call(base + "/trace/setting", {"trace_rate": "7"})
        assert changed == {**start, "trace_rate": "7"}
        # The model keeps its own rate, and follows the global settings elsewhere.
        assert call(base + "/models/identity/trace/setting")[1]["trace_rate"] == "5"
        assert call(base + "/models/add_sub/trace/setting")[1]["trace_rate"] == "7"
        # null removes the model's own value, or restores the start-up value globally.
        status, model = call(base + "/models/identity/trace/setting", {"trace_rate": None})
        assert model["trace_rate"] == "7" and model["trace_level"] == ["OFF"]
        assert call(base + "/trace/setting", {"trace_rate": None})[1] == start
    finally:
        call(base + "/models/identity/trace/setting", {"trace_level": None})


@pytest.mark.parametrize(
    "body, status, error",
    [
        ({"trace_file": "/tmp/y"}, 501, "trace file location can not be updated through network protocol"),
        ({"trace_rate": 2}, 500, "attempt to access JSON non-string as string"),
        ({"trace_rate": "0"}, 400, "Attempting to set invalid trace setting :sample rate must be non-zero"),
        ({"trace_rate": "abc"}, 400, "Unable to parse 'trace_rate', got: abc"),
        ({"trace_count": "-2"}, 400, "Unable to parse 'trace_count'. Expecting value >= -1, got:-2"),
        ({"log_frequency": "x"}, 400, "Unable to parse 'log_frequency', got: x"),
        ({"trace_level": "TIMESTAMPS"}, 500, "attempt to access JSON non-array as array"),
        ({"trace_level": ["OFF", "TIMESTAMPS"]}, 400, "Expect only one trace level 'OFF' is specified"),
    ],
)
def test_http_refusals_match_triton(server, body, status, error) -> None:
    base = f"http://{server.http_url}/v2/trace/setting"
    assert call(base, body) == (status, {"error": error})


def test_unknown_model(server) -> None:
    url = f"http://{server.http_url}/v2/models/nosuch/trace/setting"
    assert call(url) == (400, {"error": "Request for unknown model : nosuch"})


def test_grpc_round_trip(server) -> None:
    with grpcclient.InferenceServerClient(server.grpc_url) as client:
        settings = client.get_trace_settings(as_json=True)["settings"]
        assert settings["trace_level"] == {"value": ["TIMESTAMPS"]}
        reply = client.update_trace_settings("identity", {"trace_rate": "3"}, as_json=True)
        assert reply["settings"]["trace_rate"] == {"value": ["3"]}
        assert call(f"http://{server.http_url}/v2/models/identity/trace/setting")[1]["trace_rate"] == "3"
        reply = client.update_trace_settings("identity", {"trace_rate": None}, as_json=True)
        assert reply["settings"]["trace_rate"] == {"value": ["1"]}
        with pytest.raises(InferenceServerException, match="trace file location can not be updated"):
            client.update_trace_settings(settings={"trace_file": "/tmp/x"})
        assert "trace" in client.get_server_metadata(as_json=True)["extensions"]


def test_bad_trace_config_is_refused_at_startup(tmp_path: Path) -> None:
    server = ServerProcess([EXAMPLE_MODELS], ["--trace-config=level=TIMESTAMPS"], startup_timeout=60)
    with pytest.raises(RuntimeError, match="needs a trace file"):
        server.start()
