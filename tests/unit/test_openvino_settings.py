"""What an OpenVINO instance is compiled with (``compile_settings``, no openvino needed):
Triton's openvino backend parameters, f32 on the CPU unless a hint asks otherwise, the
cores divided among instances, an instance's own device, and the type mapping."""

from __future__ import annotations

from typing import Any

import pytest

from tritium.backends.openvino.compile_settings import CompileSettingsError, compile_settings
from tritium.config.openvino_types import config_type_of_openvino


def _config(count: int = 1, **params: str) -> dict[str, Any]:
    return {
        "name": "m",
        "instance_group": [{"name": "m_0", "kind": "KIND_CPU", "count": count}],
        "parameters": {k: {"string_value": v} for k, v in params.items()},
    }


def test_cpu_defaults_to_the_models_precision_and_a_share_of_the_cores() -> None:
    s = compile_settings(_config(count=2), cores=8)
    assert s.device == "CPU"
    assert dict(s.properties) == {"INFERENCE_PRECISION_HINT": "f32", "INFERENCE_NUM_THREADS": "4"}


def test_tritons_parameters_pass_through() -> None:
    s = compile_settings(
        _config(
            TARGET_DEVICE="CPU",
            PERFORMANCE_HINT="throughput",
            NUM_STREAMS="2",
            INFERENCE_NUM_THREADS="3",
            COMPILATION_NUM_THREADS="1",
            INFERENCE_PRECISION_HINT="bf16",
        ),
        cores=8,
    )
    assert dict(s.properties) == {
        "PERFORMANCE_HINT": "THROUGHPUT",
        "NUM_STREAMS": "2",
        "INFERENCE_NUM_THREADS": "3",
        "COMPILATION_NUM_THREADS": "1",
        "INFERENCE_PRECISION_HINT": "bf16",
    }
    assert (
        dict(compile_settings(_config(HINT_BF16="YES")).properties)["INFERENCE_PRECISION_HINT"]
        == "bf16"
    )


@pytest.mark.parametrize(
    ("params", "named"),
    [
        ({"PERFORMANCE_HINT": "FAST"}, "PERFORMANCE_HINT"),
        ({"NUM_STREAMS": "-1"}, "NUM_STREAMS"),
        ({"INFERENCE_PRECISION_HINT": "i8"}, "INFERENCE_PRECISION_HINT"),
    ],
)
def test_bad_parameters_are_refused_naming_them(params: dict[str, str], named: str) -> None:
    with pytest.raises(CompileSettingsError, match=named):
        compile_settings(_config(**params))


def test_an_instance_with_its_own_device_compiles_for_it() -> None:
    npu = compile_settings(_config(TARGET_DEVICE="NPU"), device_index=2)
    assert npu.device == "NPU.2"
    assert "INFERENCE_PRECISION_HINT" not in dict(npu.properties)  # the device's own choice
    # A device named with its index, or a virtual one, is taken as written.
    assert compile_settings(_config(TARGET_DEVICE="GPU.1"), device_index=2).device == "GPU.1"
    assert compile_settings(_config(TARGET_DEVICE="AUTO:GPU,CPU"), device_index=2).device == (
        "AUTO:GPU,CPU"
    )
    assert compile_settings(_config(), device_index=3).device == "CPU"
    assert compile_settings(_config(TARGET_DEVICE="GPU")).device == "GPU"


def test_openvino_types_map_to_tritons_through_the_onnx_table() -> None:
    assert config_type_of_openvino("f32") == "TYPE_FP32"
    assert config_type_of_openvino("bf16") == "TYPE_BF16"
    assert config_type_of_openvino("boolean") == "TYPE_BOOL"
    assert config_type_of_openvino("string") == "TYPE_STRING"
    assert config_type_of_openvino("u4") is None


def test_without_the_extra_a_model_fails_with_the_install_hint(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    import sys

    from tritium.backends.openvino import loading
    from tritium.backends.openvino.runtime import OpenVinoLoadError

    monkeypatch.setitem(sys.modules, "openvino", None)  # import openvino now fails
    (tmp_path / "1").mkdir()
    with pytest.raises(OpenVinoLoadError) as caught:
        loading.load("m", "1", {"backend": "openvino"}, tmp_path / "1", auto_complete=True)
    assert str(caught.value) == (
        "backend 'openvino' is not installed: pip install 'tritium[openvino]'"
    )
