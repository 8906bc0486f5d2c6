"""An ONNX instance's execute: one run per batch, outputs split per request, reshape,
strings, BF16, requested outputs and per-request errors (in process, no worker)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from tritium.backends.onnxruntime import loading  # noqa: E402
from tritium.backends.onnxruntime.session import OnnxLoadError  # noqa: E402
from tritium.backends.python.pb_utils_messages import InferenceRequest  # noqa: E402
from tritium.backends.python.pb_utils_tensor import Tensor  # noqa: E402
from tritium.config import complete_config, config_from_dict, config_to_json  # noqa: E402
from tritium.testing import onnx_models as om  # noqa: E402

T = onnx.TensorProto


def instance(tmp_path: Path, model: bytes, config: dict | None = None, count: int = 1):
    folder = om.write_model(tmp_path, "m", model)
    factory, completed = loading.load("m", "1", config or {}, folder / "1", auto_complete=True)
    completed = config_to_json(complete_config(config_from_dict(completed), "m"))
    instance = factory()
    instance.initialize({"model_config": json.dumps(completed), "model_instance_name": "m_0"})
    return instance


def request(inputs: dict[str, tuple[np.ndarray, str]], outputs: set[str] | None = None):
    tensors = [Tensor._from_buffer(n, a, w) for n, (a, w) in inputs.items()]
    wanted = outputs if outputs is not None else {"OUTPUT0", "OUTPUT1", "Y"}
    return InferenceRequest._received(tensors, wanted, "m", "1", "", 0, 0, 0, "{}", None)


def outputs(response) -> dict[str, np.ndarray]:
    assert response._error is None, response._error
    return {t._name: t._array for t in response._output_tensors}


def test_a_batch_is_one_run_split_back_per_request(tmp_path: Path) -> None:
    model = instance(tmp_path, om.add_sub())
    runs = []
    real = model.session.run
    model.session.run = lambda *a, **k: runs.append(a[1]["INPUT0"].shape) or real(*a, **k)
    batch = []
    for rows in (1, 3, 2):
        a = np.full((rows, 4), rows, np.float32)
        batch.append(
            request({"INPUT0": (a, "FP32"), "INPUT1": (np.ones((rows, 4), np.float32), "FP32")})
        )
    responses = model.execute(batch)
    assert runs == [(6, 4)]
    for rows, response in zip((1, 3, 2), responses):
        got = outputs(response)
        np.testing.assert_array_equal(got["OUTPUT0"], np.full((rows, 4), rows + 1, np.float32))
        np.testing.assert_array_equal(got["OUTPUT1"], np.full((rows, 4), rows - 1, np.float32))


def test_requests_that_cannot_be_joined_run_one_by_one(tmp_path: Path) -> None:
    model = instance(tmp_path, om.identity(T.FLOAT, ["N", "W"]))
    a = np.ones((1, 3), np.float32)
    b = np.ones((1, 5), np.float32)
    responses = model.execute([request({"X": (a, "FP32")}), request({"X": (b, "FP32")})])
    assert [outputs(r)["Y"].shape for r in responses] == [(1, 3), (1, 5)]


def test_only_requested_outputs_come_back(tmp_path: Path) -> None:
    model = instance(tmp_path, om.add_sub())
    x = np.ones((1, 4), np.float32)
    first = request({"INPUT0": (x, "FP32"), "INPUT1": (x, "FP32")}, {"OUTPUT1"})
    second = request({"INPUT0": (x, "FP32"), "INPUT1": (x, "FP32")}, {"OUTPUT0"})
    responses = model.execute([first, second])
    assert list(outputs(responses[0])) == ["OUTPUT1"]
    assert list(outputs(responses[1])) == ["OUTPUT0"]


def test_scalar_reshape_both_ways(tmp_path: Path) -> None:
    model = instance(tmp_path, om.identity(T.FLOAT, ["N"]))
    x = np.array([[1.0], [2.0]], np.float32)
    (response,) = model.execute([request({"X": (x, "FP32")})])
    np.testing.assert_array_equal(outputs(response)["Y"], x)


def test_strings_are_utf8_both_ways(tmp_path: Path) -> None:
    model = instance(tmp_path, om.identity(T.STRING))
    x = np.array([[b"a", "é".encode(), b"", b"xyz"]], dtype=object)
    (response,) = model.execute([request({"X": (x, "BYTES")})])
    got = outputs(response)["Y"]
    assert got.dtype == object and got.tolist() == x.tolist()


def test_bf16_words_pass_through(tmp_path: Path) -> None:
    model = instance(tmp_path, om.identity(T.BFLOAT16))
    words = np.array([[0x3F80, 0x4000, 0xC040, 0]], np.uint16)
    (response,) = model.execute([request({"X": (words, "BF16")})])
    (tensor,) = response._output_tensors
    assert tensor._datatype == "BF16"
    np.testing.assert_array_equal(tensor._array, words)


def test_bf16_with_string_inputs_is_refused(tmp_path: Path) -> None:
    helper = onnx.helper
    model = om.graph_model(
        [helper.make_node("Identity", ["A"], ["B"]), helper.make_node("Identity", ["C"], ["D"])],
        [om.tensor("A", T.STRING, ["N", 2]), om.tensor("C", T.BFLOAT16, ["N", 2])],
        [om.tensor("B", T.STRING, ["N", 2]), om.tensor("D", T.BFLOAT16, ["N", 2])],
    )
    with pytest.raises(OnnxLoadError, match="both BF16 tensors and STRING inputs"):
        instance(tmp_path, model)


def test_an_onnxruntime_failure_is_an_error_per_request(tmp_path: Path) -> None:
    model = instance(tmp_path, om.add_sub())
    bad = np.ones((1, 5), np.float32)
    good = np.ones((1, 4), np.float32)
    (response,) = model.execute([request({"INPUT0": (bad, "FP32"), "INPUT1": (good, "FP32")})])
    assert response._error is not None and response._error.message().startswith("onnxruntime: ")
    (response,) = model.execute([request({"INPUT0": (good, "FP32"), "INPUT1": (good, "FP32")})])
    assert response._error is None


def test_an_instance_checks_the_config_against_its_graph(tmp_path: Path) -> None:
    folder = om.write_model(tmp_path, "m", om.add_sub())
    factory, _ = loading.load("m", "1", {}, folder / "1", auto_complete=False)
    config = {
        "name": "m",
        "input": [{"name": "INPUT0", "data_type": "TYPE_FP32", "dims": [-1, 4]}],
        "instance_group": [{"count": 1, "kind": "KIND_CPU"}],
    }
    with pytest.raises(OnnxLoadError, match="input 'INPUT1' of the ONNX model of 'm' is missing"):
        factory().initialize({"model_config": json.dumps(config)})
