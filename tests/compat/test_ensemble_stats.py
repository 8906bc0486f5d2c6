"""An ensemble's statistics side by side with real Triton 2.51's.

The same requests go to ``add_sub_ensemble`` (``add_sub`` twice) on both servers; the
change in the ensemble's and in ``add_sub``'s statistics must have the same shape on both:
one execution per request, its queue time its own (not its steps'), and as compute input,
infer and output the sums of its steps' (equal, to the nanosecond, to what ``add_sub``
counted for those steps), in the batch statistics of the request's batch size.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from .conftest import settled

if not (Path(os.environ.get("ANCHORS", "/tmp/anchors")) / "bin" / "tritonserver").exists():
    pytest.skip("real Triton is not installed (setup-anchors.sh)", allow_module_level=True)

pytestmark = pytest.mark.anchors

A = np.array([1.0, 2.5, -3.0, 4.0], dtype=np.float32)
B = np.array([0.5, 0.25, 3.0, -1.0], dtype=np.float32)
REQUESTS = 4
PHASES = ("compute_input", "compute_infer", "compute_output")


def _stats(endpoint, model: str) -> dict:  # noqa: ANN001
    reply = endpoint.request("GET", f"/v2/models/{model}/stats")
    assert reply.status == 200, reply.show()
    return reply.json()["model_stats"][0]


def _settled_stats(endpoint, model: str, before: dict, count: int) -> dict:  # noqa: ANN001
    """The statistics once ``count`` more inferences show in them."""
    base = int(before["inference_count"])
    return settled(
        lambda: _stats(endpoint, model), lambda s: int(s["inference_count"]) - base >= count
    )


def _delta(before: dict, after: dict) -> dict:
    """What the requests added: counts and ns of each duration, executions, batch stats."""
    delta: dict = {
        key: int(after[key]) - int(before[key]) for key in ("inference_count", "execution_count")
    }
    for key, value in after["inference_stats"].items():
        was = before["inference_stats"][key]
        delta[key] = (value["count"] - was["count"], value["ns"] - was["ns"])
    batches_before = {b["batch_size"]: b for b in before["batch_stats"]}
    batches = {}
    for batch in after["batch_stats"]:
        was = batches_before.get(batch["batch_size"])
        batches[batch["batch_size"]] = {
            phase: (
                batch[phase]["count"] - (was[phase]["count"] if was else 0),
                batch[phase]["ns"] - (was[phase]["ns"] if was else 0),
            )
            for phase in PHASES
        }
    delta["batch_stats"] = {size: b for size, b in batches.items() if b["compute_infer"][0]}
    return delta


def _shape(endpoint) -> dict:  # noqa: ANN001
    """The requests' mark on the ensemble's statistics, as facts to compare across servers."""
    ensemble_before = _stats(endpoint, "add_sub_ensemble")
    step_before = _stats(endpoint, "add_sub")
    for _ in range(REQUESTS):
        reply = endpoint.request(
            "POST",
            "/v2/models/add_sub_ensemble/infer",
            (
                '{"inputs": ['
                f'{{"name": "INPUT0", "datatype": "FP32", "shape": [4], "data": {A.tolist()}}},'
                f'{{"name": "INPUT1", "datatype": "FP32", "shape": [4], "data": {B.tolist()}}}'
                "]}"
            ).encode(),
            {"Content-Type": "application/json"},
        )
        assert reply.status == 200, reply.show()
    ensemble_after = _settled_stats(endpoint, "add_sub_ensemble", ensemble_before, REQUESTS)
    step_after = _settled_stats(endpoint, "add_sub", step_before, 2 * REQUESTS)
    ensemble = _delta(ensemble_before, ensemble_after)
    step = _delta(step_before, step_after)
    print(endpoint.name, "ensemble", ensemble, "\n", endpoint.name, "add_sub", step)
    success_ns = ensemble["success"][1]
    return {
        "inference_count": ensemble["inference_count"],
        "execution_count": ensemble["execution_count"],
        "counts": {key: ensemble[key][0] for key in ("success", "fail", "queue", *PHASES)},
        "step executions": step["execution_count"],
        # Each phase: the sum of the steps' (add_sub's) for the same requests.
        "compute is the steps'": {phase: ensemble[phase][1] == step[phase][1] for phase in PHASES},
        "infer time is counted": ensemble["compute_infer"][1] > 0,
        # The ensemble's queue is its own (short) wait, not its steps' queue time.
        "queue is short": ensemble["queue"][1] < success_ns / 2,
        "batch_stats": {
            size: {phase: (count, ns == ensemble[phase][1]) for phase, (count, ns) in b.items()}
            for size, b in ensemble["batch_stats"].items()
        },
    }


def test_ensemble_statistics_have_tritons_shape(pair):
    theirs = _shape(pair.triton)
    ours = _shape(pair.tritium)
    assert ours == theirs
    # And what that shape is (so that a change on both sides cannot pass unnoticed).
    assert theirs == {
        "inference_count": REQUESTS,
        "execution_count": REQUESTS,
        "counts": {
            "success": REQUESTS,
            "fail": 0,
            "queue": REQUESTS,
            "compute_input": REQUESTS,
            "compute_infer": REQUESTS,
            "compute_output": REQUESTS,
        },
        "step executions": 2 * REQUESTS,
        "compute is the steps'": dict.fromkeys(PHASES, True),
        "infer time is counted": True,
        "queue is short": True,
        "batch_stats": {1: {phase: (REQUESTS, True) for phase in PHASES}},
    }
