"""Sequence batching side by side with Triton 2.51: what the model receives (control
inputs, initial implicit state: types, shapes, values), the errors and their texts, and the
``sequence_batching`` configuration JSON."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

if not (Path(os.environ.get("ANCHORS", "/tmp/anchors")) / "bin" / "tritonserver").exists():
    pytest.skip("real Triton is not installed (setup-anchors.sh)", allow_module_level=True)

pytestmark = pytest.mark.anchors

ONE = [("INPUT", "INT32", np.array([[3]], np.int32))]


def _described(reply) -> dict:
    _, tensors = reply.infer_parts()
    return json.loads(tensors["DESC"].reshape(-1)[0])


@pytest.mark.parametrize(
    "parameters",
    [
        {"sequence_id": 41, "sequence_start": True},
        {"sequence_id": 2**40 + 1, "sequence_start": True, "sequence_end": True},
        {"sequence_id": 42, "sequence_start": True, "sequence_end": True},
    ],
    ids=["start", "start-end-big-id", "start-end"],
)
def test_the_model_receives_the_same_control_inputs_and_initial_state(pair, parameters):
    theirs, ours = pair.infer("seq_probe", ONE, parameters=parameters)
    assert theirs.status == ours.status == 200
    assert _described(ours) == _described(theirs)


def test_a_middle_and_an_end_request_carry_the_same_controls(pair):
    theirs, ours = pair.infer("seq_probe", ONE, parameters={"sequence_id": 43, "sequence_start": True})
    assert theirs.status == ours.status == 200
    theirs, ours = pair.infer("seq_probe", ONE, parameters={"sequence_id": 43})
    assert _described(ours)["START"] == _described(theirs)["START"] == ["int32", [1, 1], [0]]
    theirs, ours = pair.infer("seq_probe", ONE, parameters={"sequence_id": 43, "sequence_end": True})
    # The model returns no state, so the initial state stays.
    assert _described(ours) == _described(theirs)


@pytest.mark.parametrize(
    "parameters",
    [{}, {"sequence_id": 0, "sequence_start": True}, {"sequence_id": 44}, {"sequence_id": "x"}],
    ids=["no-id", "zero-id", "no-start", "no-start-string-id"],
)
def test_refusals_have_tritons_status_and_text(pair, parameters):
    theirs, ours = pair.infer("seq_probe", ONE, parameters=parameters)
    assert theirs.status == ours.status == 400
    assert ours.error == theirs.error


def test_sequence_batching_config_json_matches(pair):
    theirs, ours = pair.both("GET", "/v2/models/seq_probe/config")
    assert ours.json()["sequence_batching"] == theirs.json()["sequence_batching"]


def test_a_request_of_two_rows_is_refused_as_triton_does(pair):
    two = [("INPUT", "INT32", np.array([[1], [2]], np.int32))]
    theirs, ours = pair.infer(
        "seq_probe", two, parameters={"sequence_id": 45, "sequence_start": True}
    )
    assert theirs.status == ours.status == 400
    assert ours.error == theirs.error
