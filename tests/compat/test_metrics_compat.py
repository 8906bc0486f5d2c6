"""``/metrics``, the logging and the trace extension side by side with real Triton 2.51.

Both servers get the same traffic (successes, a raising model, a model answering an
error); then every per-model family Triton prints must appear on tritium's page with the
same HELP text, TYPE and label names, and the same counts.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
import urllib.request
from collections.abc import Iterator

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tritium.testing import ServerProcess

from .conftest import (
    MODELS,
    STOP_SERVER,
    TRITON_PORTS,
    TRITONSERVER,
    Endpoint,
    _port_is_free,
    infer_body,
    settled,
)

if not TRITONSERVER.exists():
    pytest.skip("real Triton is not installed (setup-anchors.sh)", allow_module_level=True)

pytestmark = pytest.mark.anchors

LOADED = ("add_sub", "raises", "error_response")


class Servers:
    def __init__(self, triton: Endpoint, triton_metrics: int, tritium: ServerProcess) -> None:
        self.triton = triton
        self.triton_metrics = triton_metrics
        self.tritium = tritium
        self.tritium_http = Endpoint("tritium", tritium.port or 0)

    def pages(self, requests: dict[str, int]) -> tuple[str, str]:
        """Both /metrics pages, once each counts ``requests[model]`` requests per model."""

        def get(port: int) -> str:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30) as r:
                return r.read().decode()

        def page(port: int) -> str:
            return settled(lambda: get(port), lambda text: requests_per_model(text) == requests)

        return page(self.triton_metrics), page(self.tritium.metrics_port or 0)


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Servers]:
    workdir = tmp_path_factory.mktemp("triton-metrics")
    http, metrics = [p for p in TRITON_PORTS if _port_is_free(p)][-2:]
    log = open(workdir / "triton.log", "wb")  # noqa: SIM115 - closed below
    triton = subprocess.Popen(
        [
            str(TRITONSERVER),
            f"--model-repository={MODELS}",
            "--model-control-mode=explicit",
            *(f"--load-model={m}" for m in LOADED),
            "--http-address=127.0.0.1",
            f"--http-port={http}",
            f"--metrics-port={metrics}",
            "--allow-grpc=false",
            "--allow-gpu-metrics=false",
        ],
        stdin=subprocess.DEVNULL,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    tritium = ServerProcess(
        [MODELS],
        ["--model-control-mode=explicit", *(f"--load-model={m}" for m in LOADED)],
        metrics=True,
    )
    try:
        tritium.start()
        endpoint = Endpoint("triton", http)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            try:
                if endpoint.request("GET", "/v2/health/ready").status == 200:
                    break
            except OSError:
                pass
            if triton.poll() is not None:
                pytest.skip("Triton exited at start-up (port taken?)")
            time.sleep(0.2)
        yield Servers(endpoint, metrics, tritium)
    finally:
        tritium.stop()
        pid_file = workdir / "triton.pid"
        pid_file.write_text(str(triton.pid))
        if STOP_SERVER.exists():
            # Also removes python-backend shared memory if Triton has to be killed.
            subprocess.run([str(STOP_SERVER), str(pid_file), "20"], check=False)
        elif triton.poll() is None:
            os.killpg(triton.pid, signal.SIGTERM)
        try:
            triton.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(triton.pid, signal.SIGKILL)
            triton.wait(10)
        log.close()


def both(servers: Servers, method: str, path: str, body: bytes | None = None, headers=None):
    return (
        servers.triton.request(method, path, body, headers),
        servers.tritium_http.request(method, path, body, headers),
    )


def requests_per_model(text: str) -> dict[str, int]:
    """model -> its successful plus failed requests on a /metrics page."""
    out: dict[str, int] = {}
    for family in text_string_to_metric_families(text):
        if family.name in ("nv_inference_request_success", "nv_inference_request_failure"):
            for s in family.samples:
                model = s.labels["model"]
                out[model] = out.get(model, 0) + int(s.value)
    return out


def families(text: str) -> dict[str, tuple[str, str, set[frozenset[str]]]]:
    """name -> (help, type, label-name sets of its samples)."""
    out = {}
    for family in text_string_to_metric_families(text):
        labels = {frozenset(s.labels) for s in family.samples}
        out[family.name] = (family.documentation, family.type, labels)
    return out


def counts(text: str) -> dict[tuple[str, frozenset], float]:
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, frozenset(s.labels.items()))] = s.value
    return out


def test_same_families_help_types_labels_and_counts(servers: Servers) -> None:
    import numpy as np

    add_sub = [
        ("INPUT0", "FP32", np.ones(4, np.float32)),
        ("INPUT1", "FP32", np.ones(4, np.float32)),
    ]
    one = [("INPUT", "FP32", np.ones(1, np.float32))]
    sent = {"add_sub": 3, "raises": 2, "error_response": 1}
    for path, inputs in (("add_sub", add_sub), ("raises", one), ("error_response", one)):
        body, headers = infer_body(inputs, binary_inputs=False)
        for _ in range(sent[path]):
            theirs, ours = both(servers, "POST", f"/v2/models/{path}/infer", body, headers)
            assert theirs.status == ours.status, (path, theirs.show(), ours.show())
    triton_page, tritium_page = servers.pages(sent)
    assert requests_per_model(triton_page) == requests_per_model(tritium_page) == sent
    theirs, ours = families(triton_page), families(tritium_page)
    compared = [n for n in theirs if n.startswith(("nv_inference_", "nv_cpu_"))]
    assert len(compared) >= 12, sorted(theirs)
    for name in compared:
        assert name in ours, name
        assert ours[name][:2] == theirs[name][:2], name
        assert ours[name][2] == theirs[name][2], name
    theirs_counts, ours_counts = counts(triton_page), counts(tritium_page)
    for key, value in theirs_counts.items():
        name, labels = key
        if dict(labels).get("model") == "error_response":
            continue  # see below
        if name.removesuffix("_total") in (
            "nv_inference_request_success",
            "nv_inference_request_failure",
        ):
            assert ours_counts[key] == value, key
    # A deliberate difference: Triton counts a response that carries the model's error
    # (InferenceResponse(error=...)) as a success; tritium counts it as a BACKEND failure,
    # in the statistics extension and here alike.
    model = {"model": "error_response", "version": "1"}
    success = ("nv_inference_request_success_total", frozenset(model.items()))
    backend = (
        "nv_inference_request_failure_total",
        frozenset({**model, "reason": "BACKEND"}.items()),
    )
    assert (theirs_counts[success], theirs_counts[backend]) == (1, 0)
    assert (ours_counts[success], ours_counts[backend]) == (0, 1)
    # Triton counts an execution of a model that raises as no execution; the statistics
    # (and so the metrics) of tritium count it: compare successful models only.
    for name in ("nv_inference_count_total", "nv_inference_exec_count_total"):
        key = (name, frozenset({"model": "add_sub", "version": "1"}.items()))
        assert ours_counts[key] == theirs_counts[key] == 3


def test_logging_and_trace_settings_answer_alike(servers: Servers) -> None:
    theirs, ours = both(servers, "GET", "/v2/logging")
    assert (theirs.status, theirs.json()) == (ours.status, ours.json())
    for body in (b'{"log_file":"/tmp/x"}', b'{"log_info":"yes"}', b'{"log_format":"bad"}'):
        theirs, ours = both(servers, "POST", "/v2/logging", body)
        assert (theirs.status, theirs.json()) == (ours.status, ours.json()), body
    theirs, ours = both(servers, "GET", "/v2/trace/setting")
    assert theirs.status == ours.status == 200
    assert json.loads(theirs.body).keys() == json.loads(ours.body).keys()
    for body in (b'{"trace_file":"/tmp/y"}', b'{"trace_rate":2}', b'{"trace_rate":"0"}'):
        theirs, ours = both(servers, "POST", "/v2/trace/setting", body)
        assert (theirs.status, theirs.json()) == (ours.status, ours.json()), body
    theirs, ours = both(servers, "GET", "/v2/models/nosuch/trace/setting")
    assert (theirs.status, theirs.json()) == (ours.status, ours.json())
