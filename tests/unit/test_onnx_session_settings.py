"""Triton's onnxruntime parameters read into one instance's session settings."""

from __future__ import annotations

import pytest

from tritium.backends.onnxruntime.session_settings import (
    SettingsError,
    check_providers,
    instance_count,
    session_settings,
)
from tritium.config import config_to_json, parse_config_text


def settings(text: str, cores: int = 8, **kw):
    return session_settings(config_to_json(parse_config_text(text, "m")), cores=cores, **kw)


def param(key: str, value: str) -> str:
    return f'parameters {{ key: "{key}" value: {{ string_value: "{value}" }} }}'


def test_instances_divide_the_cores_when_no_thread_count_is_given() -> None:
    # Better than Triton: ORT's default gives each of the 4 instances all 8 cores.
    s = settings("instance_group [ { count: 2 }, { count: 2 } ]")
    assert (s.intra_op_threads, s.inter_op_threads, s.parallel) == (2, 1, False)
    assert settings("instance_group [ { count: 16 } ]").intra_op_threads == 1
    assert settings("").intra_op_threads == 8


def test_thread_counts_and_execution_mode_are_taken_as_given() -> None:
    s = settings(
        param("intra_op_thread_count", "3")
        + param("inter_op_thread_count", "2")
        + param("execution_mode", "1")
        + "instance_group [ { count: 4 } ]"
    )
    assert (s.intra_op_threads, s.inter_op_threads, s.parallel) == (3, 2, True)
    # A parallel executor without an inter-op count gets the instance's share.
    assert (
        settings(param("execution_mode", "1") + "instance_group [ { count: 2 } ]").inter_op_threads
        == 4
    )


def test_memory_flags_graph_level_and_session_entries() -> None:
    s = settings(
        param("enable_mem_arena", "0")
        + param("enable_mem_pattern", "0")
        + param("memory.enable_memory_arena_shrinkage", "cpu:0")
        + param("session.intra_op.allow_spinning", "0")
        + param("session.use_env_allocators", "1")
        + "optimization { graph { level: 1 } }"
    )
    assert (s.mem_arena, s.mem_pattern) == (False, False)
    assert s.graph_level == "ORT_ENABLE_EXTENDED"
    assert s.run_entries == (("memory.enable_memory_arena_shrinkage", "cpu:0"),)
    assert s.session_entries == (
        ("session.intra_op.allow_spinning", "0"),
        ("session.use_env_allocators", "1"),
    )
    assert settings("optimization { graph { level: -1 } }").graph_level == "ORT_ENABLE_BASIC"
    assert settings("").graph_level == "ORT_ENABLE_ALL"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            param("intra_op_thread_count", "two"),
            "parameter 'intra_op_thread_count' must be an integer",
        ),
        (param("enable_mem_arena", "maybe"), "parameter 'enable_mem_arena' must be a boolean"),
        (
            'optimization { execution_accelerators { cpu_execution_accelerator { name: "tpu" } } }',
            "unknown Execution Accelerator 'tpu' is requested",
        ),
    ],
)
def test_bad_parameters_are_named(text: str, message: str) -> None:
    with pytest.raises(SettingsError, match=message):
        settings(text)


def test_openvino_accelerator_with_its_parameters() -> None:
    s = settings(
        "optimization { execution_accelerators { cpu_execution_accelerator {"
        ' name: "openvino" parameters { key: "device_type" value: "CPU" } } } }'
    )
    assert s.providers == (("OpenVINOExecutionProvider", {"device_type": "CPU"}),)


def test_a_missing_accelerator_fails_with_the_extra_to_install() -> None:
    s = settings(
        'optimization { execution_accelerators { cpu_execution_accelerator { name: "openvino" } } }'
    )
    with pytest.raises(SettingsError) as info:
        check_providers(s, ["CPUExecutionProvider"], "m")
    assert str(info.value) == (
        "model 'm' asks for execution provider OpenVINOExecutionProvider, which this "
        "onnxruntime does not have (it has CPUExecutionProvider): pip install 'tritium[onnxruntime-openvino]'"
        " (onnxruntime-openvino, in place of onnxruntime)"
    )
    check_providers(s, ["OpenVINOExecutionProvider", "CPUExecutionProvider"], "m")


def test_gpu_instances_ask_for_cuda_on_their_device() -> None:
    s = settings("", kind="GPU", device_id=3)
    assert s.providers == (("CUDAExecutionProvider", {"device_id": "3"}),)


def test_instance_count_sums_the_groups() -> None:
    assert instance_count({"instance_group": [{"count": 2}, {"count": 3}]}) == 5
    assert instance_count({}) == 1


def test_the_openvino_providers_plain_device_gets_the_instances_own_device() -> None:
    from tritium.backends.onnxruntime.session_settings import session_settings

    def config(device_type: str) -> dict:
        accelerator = {"name": "openvino", "parameters": {"device_type": device_type}}
        return {
            "instance_group": [{"count": 1}],
            "optimization": {
                "execution_accelerators": {"cpu_execution_accelerator": [accelerator]}
            },
        }

    def device(device_type: str, own: int | None) -> str:
        (provider,) = session_settings(config(device_type), own_device=own).providers
        return provider[1]["device_type"]

    assert device("GPU", 2) == "GPU.2"
    assert device("GPU", None) == "GPU"  # no device of its own: as written
    assert device("GPU.0", 2) == "GPU.0"
    assert device("CPU", 2) == "CPU"
