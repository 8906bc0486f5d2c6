"""complete_config fills in what Triton fills in (checked against Triton 2.51's output)."""

from __future__ import annotations

import pytest
from tritonclient.grpc.model_config_pb2 import ModelConfig, ModelInstanceGroup

from tritium.config import complete_config, parse_config_text

CPU = ModelInstanceGroup.KIND_CPU
GPU = ModelInstanceGroup.KIND_GPU
MODEL = ModelInstanceGroup.KIND_MODEL


def complete(text: str, name: str = "m", gpu_count: int = 0) -> ModelConfig:
    return complete_config(parse_config_text(text, name), name, gpu_count=gpu_count)


def test_input_is_not_modified() -> None:
    original = parse_config_text('backend: "python"', "m")
    before = original.SerializeToString()
    completed = complete_config(original, "m")
    assert original.SerializeToString() == before
    assert completed is not original


def test_empty_config_becomes_a_python_model() -> None:
    # Triton does this for a folder without config.pbtxt whose version holds model.py.
    config = complete_config(ModelConfig(), "noconfig")
    assert config.name == "noconfig"
    assert config.backend == "python"
    assert config.platform == ""
    assert config.default_model_filename == "model.py"
    assert config.version_policy.WhichOneof("policy_choice") == "latest"
    assert config.version_policy.latest.num_versions == 1


def test_name_is_kept_when_given() -> None:
    # Even when it differs from the folder: validation reports that, not completion.
    assert complete('name: "other"', "m").name == "other"


def test_existing_version_policy_is_kept() -> None:
    config = complete("version_policy { all {} }")
    assert config.version_policy.WhichOneof("policy_choice") == "all"


@pytest.mark.parametrize(
    "text, backend, platform, filename",
    [
        ('backend: "python"', "python", "", "model.py"),
        ('default_model_filename: "model.py"', "python", "", "model.py"),
        ('backend: "python" default_model_filename: "other.py"', "python", "", "other.py"),
        ('platform: "onnxruntime_onnx"', "onnxruntime", "onnxruntime_onnx", "model.onnx"),
        ('backend: "onnxruntime"', "onnxruntime", "onnxruntime_onnx", "model.onnx"),
        ('platform: "pytorch_libtorch"', "pytorch", "pytorch_libtorch", "model.pt"),
        ('platform: "tensorrt_plan"', "tensorrt", "tensorrt_plan", "model.plan"),
        ('default_model_filename: "model.plan"', "tensorrt", "tensorrt_plan", "model.plan"),
        (
            'default_model_filename: "model.savedmodel"',
            "tensorflow",
            "tensorflow_savedmodel",
            "model.savedmodel",
        ),
        ('backend: "tensorflow"', "tensorflow", "", ""),  # Triton needs the files to tell
        ('default_model_filename: "model.xml"', "openvino", "", "model.xml"),
        ('platform: "ensemble"', "", "ensemble", ""),
        ('default_model_filename: "model.weird"', "", "", "model.weird"),
        ('backend: "custom"', "custom", "", ""),
    ],
)
def test_backend_fields(text: str, backend: str, platform: str, filename: str) -> None:
    config = complete(text)
    assert (config.backend, config.platform, config.default_model_filename) == (
        backend,
        platform,
        filename,
    )


def test_dynamic_batching_preferred_size_defaults_to_max_batch_size() -> None:
    config = complete("max_batch_size: 16 dynamic_batching { max_queue_delay_microseconds: 5 }")
    assert list(config.dynamic_batching.preferred_batch_size) == [16]
    assert config.dynamic_batching.max_queue_delay_microseconds == 5


def test_dynamic_batching_keeps_given_preferred_sizes() -> None:
    config = complete("max_batch_size: 16 dynamic_batching { preferred_batch_size: [ 4, 8 ] }")
    assert list(config.dynamic_batching.preferred_batch_size) == [4, 8]


def test_dynamic_batching_without_batching_gets_no_preferred_size() -> None:
    # Triton accepts dynamic_batching with max_batch_size 0 and leaves the list empty.
    config = complete("dynamic_batching {}")
    assert config.HasField("dynamic_batching")
    assert list(config.dynamic_batching.preferred_batch_size) == []


def test_no_dynamic_batching_is_not_invented() -> None:
    assert not complete("max_batch_size: 8").HasField("dynamic_batching")


def test_sequence_batching_defaults() -> None:
    config = complete("max_batch_size: 8 sequence_batching { oldest {} }")
    assert config.sequence_batching.max_sequence_idle_microseconds == 1_000_000
    assert list(config.sequence_batching.oldest.preferred_batch_size) == [8]
    kept = complete("sequence_batching { max_sequence_idle_microseconds: 7 }")
    assert kept.sequence_batching.max_sequence_idle_microseconds == 7


def test_pinned_memory_defaults_on_but_explicit_false_kept() -> None:
    config = complete("")
    assert config.optimization.input_pinned_memory.enable is True
    assert config.optimization.output_pinned_memory.enable is True
    config = complete("optimization { input_pinned_memory { enable: false } }")
    assert config.optimization.input_pinned_memory.enable is False
    assert config.optimization.output_pinned_memory.enable is True


def test_ensemble_gets_no_instance_group_or_optimization() -> None:
    config = complete('platform: "ensemble" ensemble_scheduling { step [ { model_name: "a" } ] }')
    assert not config.HasField("optimization")
    assert len(config.instance_group) == 0


def test_default_instance_group_named_after_model() -> None:
    config = complete("", "noig")
    (group,) = config.instance_group
    assert (group.name, group.kind, group.count, list(group.gpus)) == ("noig", CPU, 1, [])


def test_default_instance_group_with_gpus() -> None:
    (group,) = complete("", "m", gpu_count=2).instance_group
    assert (group.name, group.kind, group.count, list(group.gpus)) == ("m", GPU, 1, [0, 1])


def test_unnamed_groups_get_model_and_index() -> None:
    config = complete(
        'instance_group [ { count: 0 }, { name: "named" count: 2 }, { kind: KIND_CPU } ]',
        "count0",
    )
    assert [g.name for g in config.instance_group] == ["count0_0", "named", "count0_2"]
    assert [g.count for g in config.instance_group] == [1, 2, 1]
    assert [g.kind for g in config.instance_group] == [CPU, CPU, CPU]


def test_negative_count_becomes_default() -> None:
    assert complete("instance_group [ { count: -3 } ]").instance_group[0].count == 1


def test_kind_auto_resolves_by_gpus() -> None:
    assert complete("instance_group [ { } ]", gpu_count=0).instance_group[0].kind == CPU
    group = complete("instance_group [ { } ]", gpu_count=1).instance_group[0]
    assert (group.kind, list(group.gpus)) == (GPU, [0])
    # An AUTO group naming a GPU that is not present falls back to the CPU.
    group = complete("instance_group [ { gpus: [ 3 ] } ]", gpu_count=2).instance_group[0]
    assert group.kind == CPU
    group = complete("instance_group [ { gpus: [ 1 ] } ]", gpu_count=2).instance_group[0]
    assert (group.kind, list(group.gpus)) == (GPU, [1])


def test_kind_gpu_without_gpus_lists_all_present() -> None:
    group = complete("instance_group [ { kind: KIND_GPU } ]", gpu_count=3).instance_group[0]
    assert list(group.gpus) == [0, 1, 2]
    # With no GPU present it stays empty, for validation to report.
    group = complete("instance_group [ { kind: KIND_GPU } ]", gpu_count=0).instance_group[0]
    assert (group.kind, list(group.gpus)) == (GPU, [])


def test_kind_model_is_kept() -> None:
    group = complete("instance_group [ { kind: KIND_MODEL } ]").instance_group[0]
    assert (group.kind, group.count) == (MODEL, 1)


def test_onnxruntime_cpu_groups_default_to_two_instances() -> None:
    # Triton's SetDefaultInstanceCount; python stays at one.
    config = complete('platform: "onnxruntime_onnx" instance_group [ { kind: KIND_CPU } ]')
    assert config.instance_group[0].count == 2
    assert complete("instance_group [ { kind: KIND_CPU } ]").instance_group[0].count == 1
