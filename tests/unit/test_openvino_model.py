"""An OpenVINO instance (in process, no worker): auto-complete from the model, one run per
batch split back per request, the model's precision by default, Triton's parameters
reaching the compiled model, and the load errors.

The models are ONNX graphs built with onnx.helper and converted with openvino's
``convert_model`` at test time. openvino is not in the ``test`` extra (a 59 MB wheel,
180 MB installed): without it these tests are skipped.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
pytest.importorskip(
    "openvino",
    reason="openvino is not installed (pip install 'tritium[openvino]')",
)

from tritium.backends.openvino import loading  # noqa: E402
from tritium.backends.openvino.runtime import OpenVinoLoadError  # noqa: E402
from tritium.backends.python.pb_utils_messages import InferenceRequest  # noqa: E402
from tritium.backends.python.pb_utils_tensor import Tensor  # noqa: E402
from tritium.config import (  # noqa: E402
    complete_config,
    config_from_dict,
    config_to_json,
    parse_config_text,
)
from tritium.testing import onnx_models as om  # noqa: E402
from tritium.testing.openvino_models import write_openvino_model  # noqa: E402

T = onnx.TensorProto
BACKEND = 'backend: "openvino"\n'


def _mlp(w: np.ndarray) -> bytes:
    """``Y = X @ W`` with W float32 (fractional values: bf16 would round them)."""
    helper = onnx.helper
    weights = helper.make_tensor("W", T.FLOAT, list(w.shape), w.ravel().tolist())
    return om.graph_model(
        [helper.make_node("MatMul", ["X", "W"], ["Y"])],
        [om.tensor("X", T.FLOAT, ["N", w.shape[0]])],
        [om.tensor("Y", T.FLOAT, ["N", w.shape[1]])],
        [weights],
    )


def instance(tmp_path: Path, model: bytes, config: str = BACKEND, args: dict | None = None):
    folder = write_openvino_model(tmp_path, "m", model)
    pb = parse_config_text(config, "m")
    factory, completed = loading.load(
        "m", "1", config_to_json(pb), folder / "1", auto_complete=True
    )
    completed = config_to_json(complete_config(config_from_dict(completed), "m"))
    model_instance = factory()
    model_instance.initialize(
        {"model_config": json.dumps(completed), "model_instance_name": "m_0", **(args or {})}
    )
    return model_instance, completed


def request(inputs: dict[str, np.ndarray], outputs: set[str]):
    tensors = [Tensor._from_buffer(n, a, "FP32") for n, a in inputs.items()]
    return InferenceRequest._received(tensors, outputs, "m", "1", "", 0, 0, 0, "{}", None)


def outputs(response) -> dict[str, np.ndarray]:
    assert response._error is None, response._error
    return {t._name: t._array for t in response._output_tensors}


def test_auto_complete_fills_tensors_and_batching_from_the_model(tmp_path: Path) -> None:
    _, config = instance(tmp_path, om.add_sub())
    assert config["backend"] == "openvino"
    assert config["max_batch_size"] == 4 and "dynamic_batching" in config
    assert [(i["name"], i["data_type"], i["dims"]) for i in config["input"]] == [
        ("INPUT0", "TYPE_FP32", [4]),
        ("INPUT1", "TYPE_FP32", [4]),
    ]
    assert [o["name"] for o in config["output"]] == ["OUTPUT0", "OUTPUT1"]


def test_a_batch_is_one_infer_split_back_per_request(tmp_path: Path) -> None:
    model, _ = instance(tmp_path, om.add_sub())
    runs = []
    real = model.request.infer
    model.request.infer = lambda feeds, **k: runs.append(feeds["INPUT0"].shape) or real(feeds, **k)
    batch = [
        request(
            {
                "INPUT0": np.full((rows, 4), rows, np.float32),
                "INPUT1": np.ones((rows, 4), np.float32),
            },
            {"OUTPUT0"} if rows == 3 else {"OUTPUT0", "OUTPUT1"},
        )
        for rows in (1, 3, 2)
    ]
    responses = model.execute(batch)
    assert runs == [(6, 4)]
    for rows, response in zip((1, 3, 2), responses):
        got = outputs(response)
        np.testing.assert_array_equal(got["OUTPUT0"], np.full((rows, 4), rows + 1, np.float32))
        if rows == 3:
            assert set(got) == {"OUTPUT0"}  # only what the request asked for
        else:
            np.testing.assert_array_equal(got["OUTPUT1"], np.full((rows, 4), rows - 1, np.float32))


def test_fp32_models_run_in_fp32_unless_a_hint_asks_otherwise(tmp_path: Path) -> None:
    rng = np.random.default_rng(7)
    w = rng.standard_normal((64, 16)).astype(np.float32)
    x = rng.standard_normal((2, 64)).astype(np.float32)
    model, _ = instance(tmp_path / "a", _mlp(w))
    assert str(model.compiled.get_property("INFERENCE_PRECISION_HINT")) in (
        "<Type: 'float32'>",
        "f32",
    )
    y = outputs(model.execute([request({"X": x}, {"Y"})])[0])["Y"]
    np.testing.assert_allclose(y, x @ w, rtol=1e-5, atol=1e-4)  # bf16 would be ~1e-2 off
    hinted, _ = instance(
        tmp_path / "b",
        _mlp(w),
        BACKEND + 'parameters { key: "INFERENCE_PRECISION_HINT" value: { string_value: "f16" } }',
    )
    assert model.settings.properties != hinted.settings.properties
    assert dict(hinted.settings.properties)["INFERENCE_PRECISION_HINT"] == "f16"


def test_tritons_parameters_reach_the_compiled_model(tmp_path: Path) -> None:
    config = (
        BACKEND
        + 'parameters { key: "PERFORMANCE_HINT" value: { string_value: "THROUGHPUT" } }\n'
        + 'parameters { key: "NUM_STREAMS" value: { string_value: "2" } }\n'
        + 'parameters { key: "INFERENCE_NUM_THREADS" value: { string_value: "2" } }\n'
    )
    model, _ = instance(tmp_path, om.add_sub(), config)
    assert str(model.compiled.get_property("PERFORMANCE_HINT")) in (
        "PerformanceMode.THROUGHPUT",
        "THROUGHPUT",
    )
    assert int(model.compiled.get_property("NUM_STREAMS")) == 2
    assert int(model.compiled.get_property("INFERENCE_NUM_THREADS")) == 2


def test_a_config_contradicting_the_model_fails_naming_the_tensor(tmp_path: Path) -> None:
    config = (
        BACKEND + "max_batch_size: 4\n"
        'input [ { name: "INPUT0" data_type: TYPE_INT32 dims: [ 4 ] } ]\n'
    )
    with pytest.raises(OpenVinoLoadError, match="INPUT0.*expecting TYPE_FP32"):
        instance(tmp_path, om.add_sub(), config)


def test_a_device_openvino_does_not_have_fails_the_load_naming_it(tmp_path: Path) -> None:
    import openvino as ov

    if "NPU" in ov.Core().available_devices:
        pytest.skip("this machine has an NPU")
    config = BACKEND + 'parameters { key: "TARGET_DEVICE" value: { string_value: "NPU" } }'
    with pytest.raises(OpenVinoLoadError, match="could not compile it for device 'NPU'"):
        instance(tmp_path, om.add_sub(), config)
