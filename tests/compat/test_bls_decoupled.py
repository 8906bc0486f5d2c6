"""BLS to decoupled models against real Triton 2.51: ``bls_decoupled_probe`` calls
``decoupled_echo`` with ``exec(decoupled=True)`` / ``async_exec(decoupled=True)`` (and
``exec()`` without it, and add_sub with it) and reports every response it got; both
servers must report the same, but for one deliberate difference: an error response the
called model sends mid-stream is yielded by tritium's iterator (as Triton's documentation
has it: "check if the inference response has an error" inside the loop), while Triton
2.51 leaves it out."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

if not (Path(os.environ.get("ANCHORS", "/tmp/anchors")) / "bin" / "tritonserver").exists():
    pytest.skip("real Triton is not installed (setup-anchors.sh)", allow_module_level=True)

pytestmark = pytest.mark.anchors


@pytest.mark.parametrize(
    "command",
    [
        {"how": "sync", "text": "one two three"},
        {"how": "sync", "text": ""},
        {"how": "async", "text": "a b"},
        {"how": "plain", "text": "a b"},
        {"how": "add_sub"},
    ],
    ids=["sync", "no-responses", "async", "not-decoupled-call", "add_sub"],
)
def test_bls_decoupled_reports_match(pair, command: dict) -> None:
    inputs = [("text_input", "BYTES", np.array([json.dumps(command).encode()], np.object_))]
    theirs, ours = pair.infer("bls_decoupled_probe", inputs)
    assert ours.status == theirs.status == 200
    assert _report(ours) == _report(theirs)


def _report(reply) -> dict:  # noqa: ANN001
    (output,) = reply.json()["outputs"]
    return json.loads(output["data"][0])


def test_an_error_response_mid_stream_is_yielded_where_triton_drops_it(pair) -> None:
    command = {"how": "sync", "text": "one fail two"}
    inputs = [("text_input", "BYTES", np.array([json.dumps(command).encode()], np.object_))]
    theirs, ours = pair.infer("bls_decoupled_probe", inputs)
    error = {"error": "the model was asked to fail"}
    ours_responses = _report(ours)["responses"]
    assert ours_responses[1] == error
    assert [r for r in ours_responses if r != error] == _report(theirs)["responses"]
