"""config → JSON exactly as Triton's GET /v2/models/<model>/config, and back.

The expected documents were recorded from real Triton 2.51 (see
data/config/triton_2_51/README.md), so these tests pin Triton's behaviour without Triton.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tritonclient.grpc.model_config_pb2 import DataType

from tritium.config import (
    ConfigError,
    ModelConfig,
    complete_config,
    config_from_dict,
    config_to_json,
    parse_config_text,
    validate_config,
)

TRITON = Path(__file__).parent / "data" / "config" / "triton_2_51"
RECORDED = sorted(p.stem for p in TRITON.glob("*.json") if p.stem != "rejected")


def served_config(name: str) -> ModelConfig:
    """What tritium serves for a recorded model: its pbtxt, completed."""
    pbtxt = TRITON / f"{name}.pbtxt"
    config = parse_config_text(pbtxt.read_text(), name) if pbtxt.exists() else ModelConfig()
    return complete_config(config, name)


def test_recordings_cover_the_bench_models() -> None:
    assert {"add_sub", "identity", "identity_inst2", "bytes_echo", "image_sum"} <= set(RECORDED)


@pytest.mark.parametrize("name", RECORDED)
def test_json_matches_triton_key_for_key(name: str) -> None:
    recorded = (TRITON / f"{name}.json").read_text()
    ours = config_to_json(served_config(name))
    assert ours == json.loads(recorded)
    # Same key order and number formatting too: Triton's compact bytes, reproduced.
    assert json.dumps(ours, separators=(",", ":")) == recorded


@pytest.mark.parametrize("name", RECORDED)
def test_recorded_models_are_valid(name: str) -> None:
    validate_config(served_config(name), name)


@pytest.mark.parametrize("name", RECORDED)
def test_round_trip_through_json(name: str) -> None:
    config = served_config(name)
    text = json.dumps(config_to_json(config))
    assert config_from_dict(json.loads(text)) == config


def test_add_sub_json_shape() -> None:
    # The points most easily got wrong, spelled out.
    doc = config_to_json(served_config("add_sub"))
    assert doc["input"][0]["dims"] == [4]  # int64 dims are numbers, not strings
    assert doc["input"][0]["data_type"] == "TYPE_FP32"  # enums by name
    assert doc["cc_model_filenames"] == {} and doc["batch_input"] == []  # empty maps/lists
    assert "dynamic_batching" not in doc  # unset messages are left out
    assert "model_transaction_policy" not in doc
    assert doc["instance_group"][0]["name"] == "add_sub_0"


def test_identity_dynamic_batching_numbers() -> None:
    batcher = config_to_json(served_config("identity"))["dynamic_batching"]
    assert batcher["max_queue_delay_microseconds"] == 500  # uint64 printed as number
    assert batcher["preferred_batch_size"] == [64]  # Triton fills in max_batch_size


def test_64bit_fields_triton_leaves_as_strings() -> None:
    config = parse_config_text(
        """
        name: "m"
        instance_group [ { secondary_devices [ { device_id: 3 } ] } ]
        sequence_batching {
          state [ { input_name: "i" output_name: "o" dims: [ 2 ]
                    initial_state { name: "s" dims: [ 5 ] zero_data: true } } ]
          oldest { max_queue_delay_microseconds: 9 }
        }
        optimization { cuda { graph_spec [ { input { key: "x" value { dim: [ 8 ] } } } ] } }
        """,
        "m",
    )
    doc = config_to_json(config)
    assert doc["instance_group"][0]["secondary_devices"][0]["device_id"] == "3"
    state = doc["sequence_batching"]["state"][0]
    assert state["dims"] == [2]
    assert state["initial_state"][0]["dims"] == ["5"]  # Triton's converter misses these
    assert doc["sequence_batching"]["oldest"]["max_queue_delay_microseconds"] == 9
    assert doc["optimization"]["cuda"]["graph_spec"][0]["input"]["x"]["dim"] == ["8"]

    config = parse_config_text(
        "dynamic_batching { priority_levels: 2 priority_queue_policy { key: 1 value {} } }", "m"
    )
    batcher = config_to_json(config)["dynamic_batching"]
    assert batcher["priority_levels"] == 2
    assert list(batcher["priority_queue_policy"]) == ["1"]  # map keys: JSON strings
    assert batcher["priority_queue_policy"]["1"]["default_timeout_microseconds"] == 0


def test_specific_versions_and_ensemble_versions_are_numbers() -> None:
    config = parse_config_text(
        """
        name: "e" platform: "ensemble"
        version_policy { specific { versions: [ 3, 1 ] } }
        ensemble_scheduling { step [ { model_name: "a" model_version: -1 } ] }
        """,
        "e",
    )
    doc = config_to_json(config)
    assert doc["version_policy"] == {"specific": {"versions": [3, 1]}}
    assert doc["ensemble_scheduling"]["step"][0]["model_version"] == -1


def test_floats_print_like_protobuf() -> None:
    config = parse_config_text(
        """
        name: "m"
        sequence_batching {
          direct { minimum_slot_utilization: 0.1 }
          control_input [ { name: "START" control [
            { kind: CONTROL_SEQUENCE_START fp32_false_true: [ 0, 1 ] } ] } ]
        }
        """,
        "m",
    )
    sequence = config_to_json(config)["sequence_batching"]
    assert sequence["direct"]["minimum_slot_utilization"] == 0.1  # float32, shortest form
    assert sequence["control_input"][0]["control"][0]["fp32_false_true"] == [0, 1]
    assert json.dumps(sequence["control_input"][0]["control"][0]["fp32_false_true"]) == "[0, 1]"


def test_oneof_members_only_when_set() -> None:
    config = parse_config_text(
        """
        model_warmup [ { name: "w" batch_size: 1
          inputs { key: "x" value { data_type: TYPE_FP32 dims: [ 2 ] zero_data: true } } } ]
        parameters { key: "k" value {} }
        """,
        "m",
    )
    doc = config_to_json(config)
    warm_input = doc["model_warmup"][0]["inputs"]["x"]
    # zero_data / random_data / input_data_file form a oneof: only the set one is printed.
    assert warm_input == {"data_type": "TYPE_FP32", "dims": [2], "zero_data": True}
    assert doc["parameters"] == {"k": {"string_value": ""}}  # plain scalars always printed


def test_from_dict_accepts_auto_complete_style() -> None:
    # The dicts model.py's auto_complete_config builds: strings for enums, dims as
    # numbers or strings, camelCase also understood by protobuf's JSON reader.
    config = config_from_dict(
        {
            "name": "m",
            "max_batch_size": 4,
            "input": [{"name": "A", "data_type": "TYPE_INT64", "dims": ["-1", 3]}],
            "output": [{"name": "B", "dataType": "TYPE_STRING", "dims": [1]}],
            "instance_group": [{"kind": "KIND_CPU", "count": 2}],
            "dynamic_batching": {"max_queue_delay_microseconds": "100"},
        }
    )
    assert list(config.input[0].dims) == [-1, 3]
    assert config.output[0].data_type == DataType.TYPE_STRING
    assert config.instance_group[0].count == 2
    assert config.dynamic_batching.max_queue_delay_microseconds == 100


@pytest.mark.parametrize(
    "data, fragment",
    [
        ({"no_such_field": 1}, "no_such_field"),
        ({"input": [{"data_type": "TYPE_NOPE"}]}, "TYPE_NOPE"),
        ({"max_batch_size": "many"}, "max_batch_size"),
        ({"input": {"name": "A"}}, "input"),
    ],
)
def test_from_dict_rejects_invalid(data: dict, fragment: str) -> None:
    with pytest.raises(ConfigError) as info:
        config_from_dict(data)
    assert fragment in str(info.value)
