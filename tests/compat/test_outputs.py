"""Outputs as Triton 2.51 shapes them, over HTTP and gRPC with the real ``tritonclient``:
outputs declared with ``reshape`` come back with the config's dims, and the classification
extension (``class_count``) answers ``"<score>:<index>[:<label>]"`` with the labels of the
output's ``label_filename`` — unary and streaming over gRPC too.

Every request is sent unchanged to real Triton and to tritium; the answers (datatypes,
shapes, values, error codes and texts) must be equal, and equal to what the model computes.
"""

from __future__ import annotations

import os
import queue
from pathlib import Path

import numpy as np
import pytest

if not (Path(os.environ.get("ANCHORS", "/tmp/anchors")) / "bin" / "tritonserver").exists():
    pytest.skip("real Triton is not installed (setup-anchors.sh)", allow_module_level=True)

import tritonclient.grpc as grpcclient  # noqa: E402
import tritonclient.http as httpclient  # noqa: E402
from tritonclient.utils import InferenceServerException  # noqa: E402

pytestmark = pytest.mark.anchors

PROTOCOLS = {"http": httpclient, "grpc": grpcclient}
COLUMN = np.array([[1.5], [-2.0], [0.25]], dtype=np.float32)
SCORES = np.array([[0.1, 0.7, 0.2, 0.9], [0.3, 0.3, 0.1, 0.0]], dtype=np.float32)
GRID = np.arange(6, dtype=np.float32).reshape(2, 3)


def _clients(pair, protocol: str) -> list[tuple[str, object]]:
    module = PROTOCOLS[protocol]
    out = []
    for endpoint in (pair.triton, pair.tritium):
        url = endpoint.url if protocol == "http" else endpoint.grpc_url
        out.append((endpoint.name, module.InferenceServerClient(url)))
    return out


def _infer(client, module, model: str, value: np.ndarray, outputs: list[tuple[str, int]]):
    inp = module.InferInput("IN", list(value.shape), "FP32")
    inp.set_data_from_numpy(value)
    requested = [module.InferRequestedOutput(name, class_count=k) for name, k in outputs]
    return client.infer(model, [inp], outputs=requested or None)


def _answers(pair, protocol: str, model: str, value: np.ndarray, outputs: list[tuple[str, int]]):
    """{server: {output: array}} (or {server: (status, message)} when it refused)."""
    module = PROTOCOLS[protocol]
    got: dict = {}
    for name, client in _clients(pair, protocol):
        try:
            result = _infer(client, module, model, value, outputs)
            got[name] = {out: result.as_numpy(out) for out, _ in outputs}
        except InferenceServerException as exc:
            got[name] = (exc.status(), exc.message())
        finally:
            client.close()
    print(f"{protocol} {model} {outputs}\n  triton : {got['triton']}\n  tritium: {got['tritium']}")
    return got["triton"], got["tritium"]


def _assert_same(theirs: dict, ours: dict) -> None:
    assert isinstance(theirs, dict), theirs
    assert isinstance(ours, dict), ours
    assert ours.keys() == theirs.keys()
    for name in theirs:
        assert ours[name].dtype == theirs[name].dtype, name
        assert ours[name].shape == theirs[name].shape, name
        np.testing.assert_array_equal(ours[name], theirs[name])


# ------------------------------------------------------------------- reshape


@pytest.mark.parametrize("protocol", sorted(PROTOCOLS))
def test_output_reshape_gives_the_config_dims(pair, protocol):
    outputs = [("OUT", 0), ("GRID", 0), ("VAR", 0), ("PLAIN", 0)]
    theirs, ours = _answers(pair, protocol, "reshape_out", COLUMN, outputs)
    _assert_same(theirs, ours)
    x = COLUMN.reshape(3)
    np.testing.assert_array_equal(ours["OUT"], (x * 2).reshape(3, 1))
    np.testing.assert_array_equal(ours["GRID"], (np.arange(4) + x[:, None]).reshape(3, 2, 2))
    np.testing.assert_array_equal(ours["VAR"], np.ones((3, 3, 1)) * x[:, None, None])
    np.testing.assert_array_equal(ours["PLAIN"], COLUMN)


@pytest.mark.parametrize("protocol", sorted(PROTOCOLS))
def test_output_reshape_without_batching(pair, protocol):
    theirs, ours = _answers(pair, protocol, "flat_outputs", GRID, [("ROWS", 0), ("OUT", 0)])
    _assert_same(theirs, ours)
    np.testing.assert_array_equal(ours["ROWS"], GRID.reshape(3, 2))


def test_output_reshape_in_the_json_header(pair):
    # The shape written in the response header, not only the tensor tritonclient rebuilds.
    theirs, ours = pair.infer("reshape_out", [("IN", "FP32", COLUMN)])
    assert ours.status == theirs.status == 200
    assert ours.json()["outputs"] == theirs.json()["outputs"]


# ------------------------------------------------------------ classification


CLASSIFY_CASES = {
    "labels": ("classify", SCORES, [("SCORES", 3)]),
    "labels-and-none": ("classify", SCORES, [("SCORES", 2), ("COUNTS", 2)]),
    "k-capped": ("classify", SCORES, [("SCORES", 9)]),
    "mixed-with-raw": ("classify", SCORES, [("SCORES", 1), ("COUNTS", 0)]),
    "no-batching": ("flat_outputs", GRID, [("OUT", 4), ("ROWS", 2)]),
}


@pytest.mark.parametrize("protocol", sorted(PROTOCOLS))
@pytest.mark.parametrize("case", sorted(CLASSIFY_CASES))
def test_classification(pair, protocol, case):
    model, value, outputs = CLASSIFY_CASES[case]
    theirs, ours = _answers(pair, protocol, model, value, outputs)
    _assert_same(theirs, ours)


def test_classification_strings(pair):
    # Pinned as well as compared: labels come from labels.txt, an empty label is left out.
    _, ours = _answers(pair, "grpc", "classify", SCORES, [("SCORES", 3)])
    assert ours["SCORES"].tolist() == [
        [b"0.900000:3:bird", b"0.700000:1:dog", b"0.200000:2"],
        [b"0.300000:0:cat", b"0.300000:1:dog", b"0.100000:2"],
    ]


@pytest.mark.parametrize("protocol", sorted(PROTOCOLS))
def test_classification_of_an_unsupported_type(pair, protocol):
    theirs, ours = _answers(pair, protocol, "classify", SCORES, [("FLAGS", 2)])
    assert ours == theirs
    assert ours[1] == "class result not available for output due to unsupported type 'BOOL'"


def test_classification_over_a_grpc_stream(pair):
    got = {}
    for name, client in _clients(pair, "grpc"):
        replies: queue.Queue = queue.Queue()
        client.start_stream(callback=lambda result, error, q=replies: q.put((result, error)))
        try:
            for row in SCORES:
                inp = grpcclient.InferInput("IN", [1, 4], "FP32")
                inp.set_data_from_numpy(row.reshape(1, 4))
                client.async_stream_infer(
                    "classify",
                    [inp],
                    outputs=[grpcclient.InferRequestedOutput("SCORES", class_count=2)],
                )
            answers = []
            for _ in SCORES:
                result, error = replies.get(timeout=60)
                assert error is None, error
                answers.append(result.as_numpy("SCORES").tolist())
        finally:
            client.stop_stream()
            client.close()
        got[name] = answers
    assert got["tritium"] == got["triton"]
    assert got["tritium"] == [
        [[b"0.900000:3:bird", b"0.700000:1:dog"]],
        [[b"0.300000:0:cat", b"0.300000:1:dog"]],
    ]
