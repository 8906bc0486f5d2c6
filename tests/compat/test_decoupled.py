"""Decoupled models over HTTP against real Triton 2.51: ``/infer`` is refused with the
same status and text, ``generate_stream`` answers the same Server-Sent Events, and
``generate`` on a model that streams answers the same way."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

if not (Path(os.environ.get("ANCHORS", "/tmp/anchors")) / "bin" / "tritonserver").exists():
    pytest.skip("real Triton is not installed (setup-anchors.sh)", allow_module_level=True)

pytestmark = pytest.mark.anchors

JSON = {"Content-Type": "application/json"}


def _events(body: bytes) -> list[str]:
    return [line for line in body.decode().split("\n") if line]


def test_infer_is_refused(pair) -> None:
    body = json.dumps(
        {"inputs": [{"name": "text_input", "shape": [1], "datatype": "BYTES", "data": ["a"]}]}
    ).encode()
    theirs, ours = pair.both("POST", "/v2/models/decoupled_echo/infer", body, JSON)
    assert (ours.status, ours.json()) == (theirs.status, theirs.json())


@pytest.mark.parametrize("text", ["one two three", "", "one fail two"])
def test_generate_stream_events(pair, text: str) -> None:
    body = json.dumps({"text_input": text}).encode()
    theirs, ours = pair.both("POST", "/v2/models/decoupled_echo/generate_stream", body, JSON)
    assert ours.status == theirs.status == 200
    assert ours.content_type == theirs.content_type
    assert [json.loads(e.removeprefix("data: ")) for e in _events(ours.body)] == [
        json.loads(e.removeprefix("data: ")) for e in _events(theirs.body)
    ]


def test_generate_of_one_response(pair) -> None:
    body = json.dumps({"text_input": "single", "id": "9"}).encode()
    theirs, ours = pair.both("POST", "/v2/models/decoupled_echo/generate", body, JSON)
    assert (ours.status, ours.json()) == (theirs.status, theirs.json())


@pytest.mark.parametrize("text", ["a b", ""])
def test_generate_of_other_than_one_response(pair, text: str) -> None:
    """Same error text; Triton answers it with 200 (its status line is already out),
    tritium with 400, before anything is written (a deliberate difference)."""
    body = json.dumps({"text_input": text}).encode()
    theirs, ours = pair.both("POST", "/v2/models/decoupled_echo/generate", body, JSON)
    assert ours.json() == theirs.json()
    assert (theirs.status, ours.status) == (200, 400)


def test_async_execute_of_an_ordinary_model(pair) -> None:
    """``async def execute`` (and ``initialize``) in a model that is not decoupled: Triton
    awaits the coroutine and answers its responses."""
    import numpy as np

    x = np.array([[1.5, -2.0]], dtype=np.float32)
    theirs, ours = pair.infer("async_double", [("X", "FP32", x)])
    assert ours.status == theirs.status == 200
    assert ours.json() == theirs.json()
    assert ours.json()["outputs"][0]["data"] == [3.0, -4.0]
