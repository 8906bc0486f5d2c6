"""The response cache side by side with real Triton 2.51 (``--cache-config local,size=N``).

Where both answer the same: a hit echoes the new request's id and never runs the model;
JSON and binary requests with the same values share one entry; hits count in ``success``
and ``queue`` and in ``cache_hit``, not in executions; models without the cache report
zeros; a decoupled model with the cache on is refused at load. Where tritium follows
Triton's documentation instead (errors are not cached, a hit answers the outputs asked
for, identical requests in flight run once) see docs/compatibility.md; those are tested
in tests/e2e/test_response_cache.py.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from tritium.testing import ServerProcess

from .conftest import GRPC_OFFSET, Endpoint, Pair, TritonProcess, settled

if not (Path(os.environ.get("ANCHORS", "/tmp/anchors")) / "bin" / "tritonserver").exists():
    pytest.skip("real Triton is not installed (setup-anchors.sh)", allow_module_level=True)

pytestmark = pytest.mark.anchors

MODELS = Path(__file__).resolve().parent / "cache_models"
CACHE = "--cache-config=local,size=1048576"
# Where the Triton wheel keeps libtritoncache_local.so (as the shared start-triton.sh says).
CACHE_LIBS = (
    Path(os.environ.get("ANCHORS", "/tmp/anchors"))
    / "triton-venv/lib/python3.11/site-packages/pytriton/tritonserver/caches"
)


@pytest.fixture(scope="module")
def cache_pair(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pair]:
    triton = TritonProcess(
        tmp_path_factory.mktemp("triton-cache"), MODELS, [CACHE, f"--cache-directory={CACHE_LIBS}"]
    )
    tritium = ServerProcess([MODELS], ["--exit-on-error=false", CACHE], grpc=True)
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
            Endpoint("triton", triton.port, triton.port + GRPC_OFFSET),
            Endpoint("tritium", tritium.port, tritium.grpc_port),
            triton.log_path,
            tritium,
        )
    finally:
        triton.stop()
        tritium.stop()


def _inputs(value: float) -> list[tuple[str, str, np.ndarray]]:
    return [
        ("MS", "INT32", np.array([1], np.int32)),
        ("DATA", "FP32", np.array([value, value + 1], np.float32)),
    ]


def _stats(endpoint: Endpoint, model: str) -> dict:
    reply = endpoint.request("GET", f"/v2/models/{model}/stats")
    assert reply.status == 200, reply.show()
    return reply.json()["model_stats"][0]  # type: ignore[index]


def _counts(stats: dict) -> dict[str, int]:
    inference = stats["inference_stats"]
    counts = {key: value["count"] for key, value in inference.items()}
    counts["execution_count"] = stats["execution_count"]
    counts["inference_count"] = stats["inference_count"]
    return counts


def _settled_counts(endpoint: Endpoint, successes: int) -> dict[str, int]:
    """``cached_sleeper``'s counts once they show ``successes`` successful requests."""
    return settled(
        lambda: _counts(_stats(endpoint, "cached_sleeper")), lambda c: c["success"] >= successes
    )


def test_hits_echo_ids_share_json_and_binary_and_count_alike(cache_pair: Pair) -> None:
    endpoints = (cache_pair.triton, cache_pair.tritium)
    before = [_counts(_stats(e, "cached_sleeper")) for e in endpoints]
    runs = []
    for i, binary in enumerate((False, True, False)):
        replies = cache_pair.infer(
            "cached_sleeper", _inputs(3.0), binary_inputs=binary, request_id=f"r{i}"
        )
        for reply in replies:
            assert reply.status == 200, reply.show()
            header, outputs = reply.infer_parts()
            assert header["id"] == f"r{i}"
            runs.append(int(outputs["RUN"][0]))
    # Each server ran the model once: every answer repeats the first execution's RUN.
    assert len(set(runs[0::2])) == 1 and len(set(runs[1::2])) == 1
    after = [_settled_counts(e, b["success"] + 3) for e, b in zip(endpoints, before)]
    deltas = [{k: a[k] - b[k] for k in a} for a, b in zip(after, before)]
    assert deltas[0] == deltas[1]
    assert deltas[1]["cache_hit"] == 2 and deltas[1]["cache_miss"] == 1
    assert deltas[1]["success"] == 3 and deltas[1]["queue"] == 3
    assert deltas[1]["execution_count"] == 1 and deltas[1]["compute_infer"] == 1


def test_model_without_the_cache_reports_zeros(cache_pair: Pair) -> None:
    inputs = [
        ("INPUT0", "FP32", np.ones(4, np.float32)),
        ("INPUT1", "FP32", np.ones(4, np.float32)),
    ]
    for _ in range(2):
        for reply in cache_pair.infer("add_sub", inputs):
            assert reply.status == 200, reply.show()
    for endpoint in (cache_pair.triton, cache_pair.tritium):
        inference = _stats(endpoint, "add_sub")["inference_stats"]
        assert inference["cache_hit"] == {"count": 0, "ns": 0}
        assert inference["cache_miss"] == {"count": 0, "ns": 0}


def test_decoupled_model_with_the_cache_is_refused_at_load(cache_pair: Pair) -> None:
    theirs, ours = cache_pair.both("GET", "/v2/models/cached_decoupled/ready")
    assert theirs.status == ours.status != 200
    _, ours = cache_pair.both("POST", "/v2/repository/index", b"{}")
    row = next(r for r in ours.json() if r["name"] == "cached_decoupled")  # type: ignore[union-attr]
    assert row["state"] == "UNAVAILABLE"
    # Triton's index lists the model with no state; its log gives the same reason.
    assert row["reason"] in cache_pair.triton_log.read_text(errors="replace")
