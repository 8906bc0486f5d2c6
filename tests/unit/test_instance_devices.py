"""Which device each instance gets (``tritium.config.instance_devices``): Triton's order
for KIND_GPU groups, ``tritium.device_ids`` round robin for the others, the variable of
``tritium.device_env`` per instance, and the load errors naming a bad parameter."""

from __future__ import annotations

from typing import Any

import pytest

from tritium.config import ConfigError, complete_config, parse_config_text, validate_config
from tritium.config.instance_devices import (
    DeviceParameterError,
    describe,
    instance_devices,
    visible_device_index,
)


def _config(groups: list[dict[str, Any]], **params: str) -> dict[str, Any]:
    return {
        "name": "m",
        "instance_group": groups,
        "parameters": {k.replace("_", ".", 1): {"string_value": v} for k, v in params.items()},
    }


def test_gpu_groups_put_each_count_index_on_each_listed_gpu_as_triton() -> None:
    config = _config([{"name": "g", "kind": "KIND_GPU", "count": 2, "gpus": [1, 3]}])
    found = [(d.name, d.kind, d.device_id, d.env) for d in instance_devices(config)]
    assert found == [
        ("g_0", "GPU", 1, ()),
        ("g_0", "GPU", 3, ()),
        ("g_1", "GPU", 1, ()),
        ("g_1", "GPU", 3, ()),
    ]


def test_cpu_instances_are_on_device_0_without_ids() -> None:
    config = _config([{"name": "c", "kind": "KIND_CPU", "count": 2}])
    assert [(d.device_id, d.env) for d in instance_devices(config)] == [(0, ()), (0, ())]


def test_device_ids_go_round_robin_across_the_non_gpu_groups() -> None:
    config = _config(
        [
            {"name": "a", "kind": "KIND_CPU", "count": 3},
            {"name": "g", "kind": "KIND_GPU", "count": 1, "gpus": [0]},
            {"name": "b", "kind": "KIND_MODEL", "count": 2},
        ],
        tritium_device_ids="4, 6",
        tritium_device_env="ASCEND_RT_VISIBLE_DEVICES",
    )
    found = [(d.name, d.device_id, d.env) for d in instance_devices(config)]
    env = "ASCEND_RT_VISIBLE_DEVICES"
    assert found == [
        ("a_0", 4, ((env, "4"),)),
        ("a_1", 6, ((env, "6"),)),
        ("a_2", 4, ((env, "4"),)),
        ("g_0", 0, ((env, "0"),)),  # a GPU instance keeps its GPU, and gets the variable
        ("b_0", 6, ((env, "6"),)),
        ("b_1", 4, ((env, "4"),)),
    ]
    assert describe(instance_devices(config)[1]) == "a_1 (CPU device 6, " + env + "=6)"


@pytest.mark.parametrize("ids", ["x", "1,,2", "-1", "1.5"])
def test_ids_that_are_not_non_negative_integers_are_refused(ids: str) -> None:
    config = _config([{"name": "a", "kind": "KIND_CPU", "count": 1}], tritium_device_ids=ids)
    with pytest.raises(DeviceParameterError, match="tritium.device_ids"):
        instance_devices(config)


def test_the_device_index_inside_a_narrowed_worker_is_0() -> None:
    groups = [{"name": "a", "kind": "KIND_CPU", "count": 1}]
    assert visible_device_index(_config(groups, tritium_device_ids="3"), 3) == 3
    narrowed = _config(groups, tritium_device_ids="3", tritium_device_env="CUDA_VISIBLE_DEVICES")
    assert visible_device_index(narrowed, 3) == 0


def _validated(text: str, gpus: int = 0) -> None:
    config = complete_config(parse_config_text(text, "m"), "m", gpu_count=gpus)
    validate_config(config, "m", gpu_count=gpus)


BASE = (
    'name: "m" backend: "python" input [{name: "X" data_type: TYPE_FP32 dims: [1]}] '
    'output [{name: "Y" data_type: TYPE_FP32 dims: [1]}] '
)


def test_validation_refuses_bad_device_parameters_at_load() -> None:
    bad = BASE + 'parameters: { key: "tritium.device_ids" value: { string_value: "a" } }'
    with pytest.raises(ConfigError) as caught:
        _validated(bad)
    assert caught.value.phase == "load" and "tritium.device_ids" in caught.value.message
    alone = BASE + 'parameters: { key: "tritium.device_env" value: { string_value: "V" } }'
    with pytest.raises(ConfigError, match="needs device ids"):
        _validated(alone)
    # With KIND_GPU instances there are ids to set (where GPUs exist).
    _validated(alone + " instance_group [{kind: KIND_GPU}]", gpus=2)


def test_kind_gpu_without_gpus_fails_the_load_as_triton() -> None:
    with pytest.raises(ConfigError, match="has kind KIND_GPU but no GPUs are available"):
        _validated(BASE + "instance_group [{kind: KIND_GPU}]")
