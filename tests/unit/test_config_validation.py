"""validate_config: every check, with Triton's message and the phase Triton reports it in."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tritium.config import ConfigError, complete_config, parse_config_text, validate_config
from tritium.core.errors import Code

TRITON = Path(__file__).parent / "data" / "config" / "triton_2_51"
REJECTED = json.loads((TRITON / "rejected.json").read_text())

IO = """
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 4 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 4 ] } ]
"""


def check(text: str, name: str = "m", gpu_count: int = 0) -> None:
    config = complete_config(parse_config_text(text, name), name, gpu_count=gpu_count)
    validate_config(config, name, gpu_count=gpu_count)


def rejection(text: str, name: str = "m", gpu_count: int = 0) -> ConfigError:
    with pytest.raises(ConfigError) as info:
        check(text, name, gpu_count)
    return info.value


# The Triton build that produced rejected.json has only its Python backend; its refusal
# of a model whose backend tritium serves (onnxruntime) is not a rejection here.
SERVED_HERE = {"onnx"}


@pytest.mark.parametrize("model", sorted(set(REJECTED) - SERVED_HERE))
def test_same_message_and_phase_as_triton(model: str) -> None:
    case = REJECTED[model]
    error = rejection(case["config.pbtxt"], model)
    assert (error.message, error.phase) == (case["message"], case["phase"])
    assert error.code is Code.INVALID_ARG


def test_valid_python_model_passes() -> None:
    check('backend: "python" max_batch_size: 8 dynamic_batching {}' + IO)


def test_empty_name_without_completion() -> None:
    config = parse_config_text('backend: "python"', "m")
    with pytest.raises(ConfigError, match=r"^model configuration must specify 'name'$"):
        validate_config(config, "m")


@pytest.mark.parametrize(
    "text, message",
    [
        ('platform: "custom"', "unexpected platform type 'custom' for m"),
        (
            'platform: "ensemble" backend: "python"',
            "Ensemble model 'm' must have platform type 'ensemble' and empty backend type",
        ),
        (
            'platform: "onnxruntime_onnx" backend: "pytorch"',
            "unexpected 'platform' and 'backend' pair, got:onnxruntime_onnx, pytorch",
        ),
        (
            "max_batch_size: 4 dynamic_batching { preferred_batch_size: [ 0 ] }",
            "dynamic batching preferred size must be positive for m",
        ),
        (
            "max_batch_size: 4 dynamic_batching { priority_levels: 2 }",
            "default priority level must be in range [1, 2] for m",
        ),
        (
            "max_batch_size: 4 dynamic_batching { priority_levels: 2 default_priority_level: 3 }",
            "default priority level must be in range [1, 2] for m",
        ),
        (
            "max_batch_size: 4 dynamic_batching { priority_levels: 2 default_priority_level: 1"
            " priority_queue_policy { key: 3 value {} } }",
            "priority queue policy must have priority level in range [1, 2] for m",
        ),
        (
            "max_batch_size: 4 dynamic_batching { preserve_ordering: true priority_levels: 2"
            " default_priority_level: 1 }",
            "Only one priority level is allowed when 'preserve_ordering' is true for m",
        ),
        (
            "max_batch_size: 4 dynamic_batching { preserve_ordering: true default_queue_policy"
            " { timeout_action: DELAY default_timeout_microseconds: 10 } }",
            "Queue policy can not have DELAY as timeout action when 'preserve_ordering' is"
            " true for m",
        ),
        (
            "model_transaction_policy { decoupled: true } response_cache { enable: true }",
            "Response Cache does not currently support model m with 'decoupled' transaction"
            " policy. Please disable the response cache.",
        ),
        (
            'platform: "ensemble"',
            "ensemble scheduling must be set for ensemble m whose platform is ensemble",
        ),
        (
            'ensemble_scheduling { step [ { model_name: "a" } ] }',
            "ensemble scheduling cannot be set for model 'm' whose platform is not ensemble",
        ),
        (
            'platform: "ensemble" ensemble_scheduling { }',
            "must specify 'step' for ensemble 'm'",
        ),
        (
            "model_metrics { metric_control [ { } ] }",
            "metric control must specify 'metric_identifier'",
        ),
        (
            "model_metrics { metric_control [ { metric_identifier { } } ] }",
            "metric identifier must specify non-empty 'family'",
        ),
        (
            'model_metrics { metric_control [ { metric_identifier { family: "f" } } ] }',
            "metric control must specify 'histogram_options'",
        ),
        (
            'model_metrics { metric_control [ { metric_identifier { family: "f" }'
            " histogram_options { } } ] }",
            "histogram options must specify non-empty 'buckets'",
        ),
    ],
)
def test_repository_phase_checks(text: str, message: str) -> None:
    error = rejection(text + IO)
    assert (error.message, error.phase) == (message, "repository")


def test_ensemble_rejects_instance_group_optimization_and_warmup() -> None:
    base = 'name: "e" platform: "ensemble" ensemble_scheduling { step [ { model_name: "a" } ] }'
    config = complete_config(parse_config_text(base, "e"), "e")
    validate_config(config, "e")  # a well-formed ensemble is accepted here
    for extra, message in [
        ("instance_group [ { } ]", "instance group should not be specified for ensemble 'e'"),
        ("optimization { }", "optimization should not be specified for ensemble 'e'"),
        ('model_warmup [ { name: "w" } ]', "model_warmup can not be specified for ensemble 'e'"),
    ]:
        config = complete_config(parse_config_text(base + extra, "e"), "e")
        with pytest.raises(ConfigError) as info:
            validate_config(config, "e")
        assert info.value.message == message


def test_version_policy_required_without_completion() -> None:
    config = parse_config_text('name: "m" backend: "python"', "m")
    with pytest.raises(ConfigError, match=r"^must specify 'version policy' for m$"):
        validate_config(config, "m")


def test_dynamic_batching_without_max_batch_size_is_accepted() -> None:
    # Triton 2.51 loads such a model (recorded: dbnobatch); batches are then of one request.
    check("dynamic_batching {}" + IO)


@pytest.mark.parametrize(
    "tensors, message",
    [
        (
            "output [ { data_type: TYPE_FP32 dims: [ 1 ] } ]",
            "model output must specify 'name' for m",
        ),
        (
            'input [ { name: "A" data_type: TYPE_FP32 dims: [ 2, -2 ] } ]',
            "model input 'A' dimension must be integer >= 1, or -1 to indicate a variable-size"
            " dimension for m",
        ),
        (
            'input [ { name: "A" data_type: TYPE_FP32 dims: [ 1 ] reshape { shape: [ ] } } ]',
            "model input 'A' cannot have empty reshape for non-batching model as scalar tensors"
            " are not supported for m",
        ),
        (
            'input [ { name: "A" data_type: TYPE_FP32 dims: [ 4 ] reshape { shape: [ 0 ] } } ]',
            "model input 'A' reshape dimensions must be integer >= 1, or -1 to indicate a"
            " variable-size dimension for m",
        ),
        (
            'input [ { name: "A" data_type: TYPE_FP32 dims: [ 4 ] reshape { shape: [ -1 ] } } ]',
            "model input 'A' has different size for dims and reshape for m",
        ),
        (
            'input [ { name: "A" data_type: TYPE_FP32 dims: [ -1, 4 ]'
            " reshape { shape: [ -1, 2, -1 ] } } ]",
            "model input 'A' has different number of variable-size dimensions for dims and"
            " reshape for m",
        ),
        (
            'input [ { name: "A" data_type: TYPE_FP32 dims: [ 2, -1, 6 ]'
            " reshape { shape: [ 3, -1, 4 ] } } ]",
            "model input 'A' has different size for dims and reshape for m",
        ),
        (
            'input [ { name: "A" data_type: TYPE_FP32 format: FORMAT_NCHW dims: [ 4 ] } ]',
            "model input NHWC/NCHW require 3 dims for m",
        ),
        (
            'input [ { name: "A" data_type: TYPE_INT32 dims: [ 1 ] is_shape_tensor: true } ]',
            "shape tensors are only supported for TensorRT platform for m",
        ),
        (
            'output [ { name: "A" data_type: TYPE_INT32 dims: [ 1 ] is_shape_tensor: true } ]',
            "shape tensors are only supported for TensorRT platform for m",
        ),
        (
            'input [ { name: "A" data_type: TYPE_FP32 dims: [ 1 ] is_non_linear_format_io: true } ]',
            "Non-linear IO format is only supported for the TensorRT platform for m",
        ),
        (
            'input [ { name: "A" data_type: TYPE_FP32 dims: [ 4 ] },'
            ' { name: "A" data_type: TYPE_FP32 dims: [ 4 ] } ]',
            "model input 'A' is specified more than once for m",
        ),
        (
            'output [ { name: "B" data_type: TYPE_FP32 dims: [ 4 ] },'
            ' { name: "B" data_type: TYPE_INT8 dims: [ 1 ] } ]',
            "model output 'B' is specified more than once for m",
        ),
        (
            'input [ { name: "A" data_type: TYPE_FP32 dims: [ 4 ] } ]'
            ' batch_input [ { kind: BATCH_ELEMENT_COUNT target_name: "C" data_type: TYPE_FP32'
            ' source_input: [ "A", "A" ] } ]',
            "batch input kind 'BATCH_ELEMENT_COUNT' expects 1 source input, got 2 for m",
        ),
        (
            'input [ { name: "A" data_type: TYPE_FP32 dims: [ 4 ] } ]'
            ' batch_input [ { kind: BATCH_ITEM_SHAPE data_type: TYPE_INT64 source_input: "A" } ]',
            "batch input data type must be TYPE_INT32 or TYPE_FP32 for m",
        ),
        (
            'batch_input [ { kind: BATCH_ITEM_SHAPE data_type: TYPE_INT32 source_input: "Z" } ]',
            "unknown source input name 'Z' for m",
        ),
        (
            'input [ { name: "A" data_type: TYPE_FP32 dims: [ 4 ] } ]'
            ' output [ { name: "B" data_type: TYPE_FP32 dims: [ 4 ] } ]'
            ' batch_output [ { kind: BATCH_SCATTER_WITH_INPUT_SHAPE source_input: "A"'
            ' target_name: [ "B", "B" ] } ]',
            "target output name 'B' can only be specified once for m",
        ),
        (
            'input [ { name: "A" data_type: TYPE_FP32 dims: [ 4 ] } ]'
            ' batch_output [ { kind: BATCH_SCATTER_WITH_INPUT_SHAPE source_input: "A"'
            ' target_name: "Q" } ]',
            "unknown target output name 'Q' for m",
        ),
    ],
)
def test_tensor_checks(tensors: str, message: str) -> None:
    error = rejection(tensors)
    assert (error.message, error.phase) == (message, "load")


@pytest.mark.parametrize(
    "tensors",
    [
        # Matching element counts, including Triton's examples for wildcard runs.
        'input [ { name: "A" data_type: TYPE_FP32 dims: [ 2, 2 ] reshape { shape: [ 4 ] } } ]',
        'input [ { name: "A" data_type: TYPE_FP32 dims: [ 2, 4, -1, 6 ]'
        " reshape { shape: [ 8, -1, 1, 6 ] } } ]",
        'input [ { name: "A" data_type: TYPE_FP32 dims: [ -1 ] reshape { shape: [ -1 ] } } ]',
        'input [ { name: "A" data_type: TYPE_STRING dims: [ -1, -1 ] } ]',
        'input [ { name: "A" data_type: TYPE_BF16 dims: [ 3 ] optional: true } ]',
    ],
)
def test_valid_tensors_pass(tensors: str) -> None:
    check(tensors)


def test_scalar_reshape_is_allowed_with_batching() -> None:
    check(
        'max_batch_size: 8 input [ { name: "A" data_type: TYPE_FP32 dims: [ 1 ]'
        " reshape { shape: [ ] } } ]"
    )


def test_unknown_backend_reads_like_triton_missing_library() -> None:
    error = rejection('backend: "vllm"' + IO)
    assert error.message == (
        "unable to find backend library for backend 'vllm', try specifying runtime on the"
        " model configuration."
    )
    assert error.phase == "load"


def test_onnxruntime_models_pass_validation_the_triton_build_without_that_backend_refused() -> None:
    case = REJECTED["onnx"]
    assert "unable to find backend library for backend 'onnxruntime'" in case["message"]
    check(case["config.pbtxt"], "onnx")


@pytest.mark.parametrize("platform", ["tensorrt_plan", "pytorch_libtorch"])
def test_other_framework_platforms_are_unsupported(platform: str) -> None:
    error = rejection(f'platform: "{platform}"' + IO)
    assert error.message.startswith("unable to find backend library for backend ")


def test_backend_check_comes_before_tensor_checks() -> None:
    # Triton fails to find the backend before it looks at the tensors.
    error = rejection('backend: "tensorrt" platform: "tensorrt_plan" input [ { name: "A" } ]')
    assert error.message.startswith("unable to find backend library for backend 'tensorrt'")


@pytest.mark.parametrize(
    "groups, gpu_count, message",
    [
        (
            "instance_group [ { kind: KIND_GPU } ]",
            0,
            "instance group m_0 of model m has kind KIND_GPU but no GPUs are available",
        ),
        (
            "instance_group [ { kind: KIND_GPU gpus: [ 2 ] } ]",
            2,
            "instance group m_0 of model m specifies invalid or unsupported gpu id 2. GPUs with"
            " at least the minimum required CUDA compute compatibility of 6.000000 are: 0, 1",
        ),
        (
            "instance_group [ { kind: KIND_CPU gpus: [ 0 ] } ]",
            1,
            "instance group m_0 of model m has kind KIND_CPU but specifies one or more GPUs",
        ),
        (
            "instance_group [ { kind: KIND_MODEL gpus: [ 0 ] } ]",
            1,
            "instance group m_0 of model m has kind KIND_MODEL but specifies one or more GPUs",
        ),
        (
            'instance_group [ { kind: KIND_CPU profile: [ "0" ] } ]',
            0,
            "instance group m_0 of model m and platform  specifies profile field which is only"
            " supported for TensorRT models",
        ),
    ],
)
def test_instance_group_checks(groups: str, gpu_count: int, message: str) -> None:
    error = rejection(groups + IO, gpu_count=gpu_count)
    assert (error.message, error.phase) == (message, "load")


def test_gpu_groups_pass_with_gpus() -> None:
    check("instance_group [ { kind: KIND_GPU count: 2 } ]" + IO, gpu_count=1)
    check("instance_group [ { kind: KIND_GPU gpus: [ 1 ] } ]" + IO, gpu_count=2)


def test_instance_group_checks_without_completion() -> None:
    config = complete_config(parse_config_text(IO, "m"), "m")
    del config.instance_group[:]
    with pytest.raises(ConfigError, match=r"^must specify one or more 'instance group's for m$"):
        validate_config(config, "m")
    config.instance_group.add(name="g")  # KIND_AUTO, never resolved
    with pytest.raises(ConfigError, match=r"^instance group g of model m has unexpected kind"):
        validate_config(config, "m")
    config.instance_group[0].kind = config.instance_group[0].KIND_CPU
    with pytest.raises(ConfigError, match=r"^instance group g of model m must have 'count'"):
        validate_config(config, "m")
    config.instance_group[0].count = 1
    validate_config(config, "m")


@pytest.mark.parametrize(
    "sequence, message",
    [
        (
            "sequence_batching { control_input [ { } ] }",
            "sequence batching control tensor must have a name for m",
        ),
        (
            'sequence_batching { control_input [ { name: "S" }, { name: "S" } ] }',
            "sequence batching control tensor 'S' is specified for multiple control kinds for m",
        ),
        (
            'sequence_batching { control_input [ { name: "S" control [ { kind:'
            " CONTROL_SEQUENCE_START } ] } ] }",
            "sequence batching must specify either 'int32_false_true', 'fp32_false_true' or"
            " 'bool_false_true' for CONTROL_SEQUENCE_START for m",
        ),
        (
            'sequence_batching { control_input [ { name: "S" control [ { kind:'
            " CONTROL_SEQUENCE_END int32_false_true: [ 0, 1 ] bool_false_true: [ false, true ]"
            " } ] } ] }",
            "sequence batching specifies more than one from 'int32_false_true',"
            " 'fp32_false_true' and 'bool_false_true' for CONTROL_SEQUENCE_END for m",
        ),
        (
            'sequence_batching { control_input [ { name: "S" control [ { kind:'
            " CONTROL_SEQUENCE_READY fp32_false_true: [ 0 ] } ] } ] }",
            "sequence batching control 'fp32_false_true' must have exactly 2 entries for"
            " CONTROL_SEQUENCE_READY for m",
        ),
        (
            'sequence_batching { control_input [ { name: "S" control [ { kind:'
            ' CONTROL_SEQUENCE_START int32_false_true: [ 0, 1 ] } ] }, { name: "T" control [ {'
            " kind: CONTROL_SEQUENCE_START int32_false_true: [ 0, 1 ] } ] } ] }",
            "sequence batching specifies multiple CONTROL_SEQUENCE_START tensors for m",
        ),
        (
            'sequence_batching { control_input [ { name: "C" control [ { kind:'
            " CONTROL_SEQUENCE_CORRID data_type: TYPE_FP32 } ] } ] }",
            "unexpected data type for control CONTROL_SEQUENCE_CORRID for m. Allowed data types"
            " are TYPE_UINT64, TYPE_INT64, TYPE_UINT32, TYPE_INT32 and TYPE_STRING",
        ),
        (
            'sequence_batching { control_input [ { name: "C" control [ { kind:'
            " CONTROL_SEQUENCE_CORRID data_type: TYPE_UINT64 int32_false_true: [ 0, 1 ] } ] } ] }",
            "sequence batching must not specify either 'int32_false_true', 'fp32_false_true' or"
            " 'bool_false_true' for CONTROL_SEQUENCE_CORRID for m",
        ),
        (
            "max_batch_size: 2 sequence_batching { oldest { preferred_batch_size: [ 4 ] } }",
            "sequence batching preferred batch size must be <= max batch size for m",
        ),
        (
            "max_batch_size: 2 sequence_batching { oldest { preferred_batch_size: [ -1 ] } }",
            "sequence batching preferred batch size must be positive for m",
        ),
        (
            "sequence_batching { direct { minimum_slot_utilization: 1.5 } }",
            "sequence batching minimum slot utilization must be in range (0.0, 1.0] for m",
        ),
        (
            "sequence_batching { } response_cache { enable: true }",
            "Response Cache does not currently support model m with sequence batching"
            " scheduler. Please disable the response cache.",
        ),
    ],
)
def test_sequence_batching_checks(sequence: str, message: str) -> None:
    error = rejection(sequence + IO)
    assert (error.message, error.phase) == (message, "repository")


def test_well_formed_sequence_batching_passes() -> None:
    check(
        """
        max_batch_size: 4
        sequence_batching {
          direct { }
          control_input [
            { name: "START" control [ { kind: CONTROL_SEQUENCE_START int32_false_true: [ 0, 1 ] } ] },
            { name: "END" control [ { kind: CONTROL_SEQUENCE_END bool_false_true: [ false, true ] } ] },
            { name: "CORRID" control [ { kind: CONTROL_SEQUENCE_CORRID data_type: TYPE_STRING } ] }
          ]
        }
        """
        + IO
    )


def test_repository_phase_is_reported_before_load_phase() -> None:
    # Both wrong: Triton stops at the repository poll.
    error = rejection('name: "x" input [ { name: "A" } ]')
    assert error.phase == "repository"
    assert error.message.startswith("unexpected directory name 'm' for model 'x'")
