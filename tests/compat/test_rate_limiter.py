"""The rate limiter side by side with real Triton 2.51 (``--rate-limit=execution_count
--rate-limit-resource=R1:1``) on tests/rate_limit_models, where every instance needs the
one copy of R1.

Both servers: refuse ``rl_big`` (it needs two copies) with the same words, and the
ensemble that uses it; run three queued requests of priority 1 before three of priority 10,
never two runs at once; report the wait for R1 as queue time.
"""

from __future__ import annotations

import http.client
import json
import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tritium.testing import ServerProcess

from .conftest import Endpoint, Pair, TritonProcess, settled

if not (Path(os.environ.get("ANCHORS", "/tmp/anchors")) / "bin" / "tritonserver").exists():
    pytest.skip("real Triton is not installed (setup-anchors.sh)", allow_module_level=True)

pytestmark = pytest.mark.anchors

MODELS = Path(__file__).resolve().parents[1] / "rate_limit_models"
FLAGS = ["--rate-limit=execution_count", "--rate-limit-resource=R1:1"]
REFUSAL = (
    'Resource count for "R1" is limited to 1 which will prevent scheduling of one or more '
    "model instances, the minimum required count is 2"
)
WAIT_S = 60.0
# After the last request is sent, time for the server to read and queue it (the gate holds
# R1 meanwhile, so a slow machine only makes the test slower, not wrong, below this).
QUEUE_GRACE_S = 1.0


@pytest.fixture(scope="module")
def limited_pair(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pair]:
    triton = TritonProcess(tmp_path_factory.mktemp("triton-rl"), MODELS, FLAGS)
    tritium = ServerProcess([MODELS], ["--exit-on-error=false", *FLAGS], grpc=True)
    try:
        triton.launch()
        tritium.start()
        for _ in range(4):
            if triton.wait_live():
                break
            triton.launch()
        else:
            raise RuntimeError(f"Triton did not start:\n{triton.log_tail()}")
        assert tritium.port is not None and triton.port is not None
        yield Pair(
            Endpoint("triton", triton.port),
            Endpoint("tritium", tritium.port),
            triton.log_path,
            tritium,
        )
    finally:
        triton.stop()
        tritium.stop()


def _body(ms: int, gate: str = "") -> bytes:
    return json.dumps(
        {
            "inputs": [
                {"name": "MS", "datatype": "INT32", "shape": [1], "data": [ms]},
                {"name": "GATE", "datatype": "BYTES", "shape": [1], "data": [gate]},
            ]
        }
    ).encode()


class _Call(threading.Thread):
    """One infer request on its own connection; ``sent`` is set once it is written."""

    def __init__(self, endpoint: Endpoint, model: str, body: bytes) -> None:
        super().__init__(daemon=True)
        self.endpoint, self.model, self.body = endpoint, model, body
        self.sent = threading.Event()
        self.span: tuple[int, int] | None = None
        self.start()

    def run(self) -> None:
        conn = http.client.HTTPConnection("127.0.0.1", self.endpoint.port, timeout=WAIT_S)
        try:
            conn.request(
                "POST",
                f"/v2/models/{self.model}/infer",
                self.body,
                {"Content-Type": "application/json"},
            )
            self.sent.set()
            reply = json.loads(conn.getresponse().read())
            span = next(o for o in reply["outputs"] if o["name"] == "SPAN")["data"]
            self.span = (int(span[0]), int(span[1]))
        finally:
            self.sent.set()
            conn.close()

    def result(self) -> tuple[int, int]:
        self.join(WAIT_S)
        assert self.span is not None, f"{self.model} on {self.endpoint.name} did not answer"
        return self.span


def _queue(endpoint: Endpoint, model: str) -> dict[str, int]:
    reply = endpoint.request("GET", f"/v2/models/{model}/stats")
    return reply.json()["model_stats"][0]["inference_stats"]["queue"]  # type: ignore[index]


def test_a_model_needing_more_than_listed_is_refused_alike(limited_pair: Pair) -> None:
    for endpoint in (limited_pair.triton, limited_pair.tritium):
        index = {r["name"]: r for r in endpoint.request("POST", "/v2/repository/index").json()}  # type: ignore[union-attr]
        assert index["rl_big"]["state"] == "UNAVAILABLE"
        assert REFUSAL in index["rl_big"]["reason"], endpoint.name
        assert index["rl_high"]["state"] == "READY"
        assert endpoint.request("GET", "/v2/models/rl_pipeline_big/ready").status != 200


@pytest.mark.parametrize("server", ["triton", "tritium"])
def test_priority_order_and_queue_time_alike(
    limited_pair: Pair, server: str, tmp_path: Path
) -> None:
    endpoint: Endpoint = getattr(limited_pair, server)
    low_before = _queue(endpoint, "rl_low")
    gate = tmp_path / "gate"
    hold = _Call(endpoint, "rl_hold", _body(-1, str(gate)))
    deadline = time.monotonic() + WAIT_S
    while not (tmp_path / "gate.started").exists():
        assert time.monotonic() < deadline, "rl_hold did not start"
        time.sleep(0.01)
    low = [_Call(endpoint, "rl_low", _body(10)) for _ in range(3)]
    high = [_Call(endpoint, "rl_high", _body(10)) for _ in range(3)]
    for call in low + high:
        assert call.sent.wait(WAIT_S)
    time.sleep(QUEUE_GRACE_S)
    gate.touch()
    held = hold.result()
    spans = [("high", c.result()) for c in high] + [("low", c.result()) for c in low]
    order = [name for name, span in sorted(spans, key=lambda s: s[1][0])]
    assert order == ["high"] * 3 + ["low"] * 3
    intervals = sorted([held] + [span for _, span in spans])
    for (_, end), (start, _) in zip(intervals, intervals[1:]):
        assert start >= end  # one copy of R1: never two runs at once
    # The wait for R1 is reported as queue time.
    last_high_end = max(span[1] for name, span in spans if name == "high")
    queue = settled(
        lambda: _queue(endpoint, "rl_low"), lambda q: q["count"] >= low_before["count"] + 3
    )
    assert queue["count"] == low_before["count"] + 3
    assert queue["ns"] - low_before["ns"] >= 3 * (last_high_end - held[1]) > 0
