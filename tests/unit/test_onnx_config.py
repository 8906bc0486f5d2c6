"""Auto-complete and checks of onnxruntime models' configurations against their graph,
as Triton's onnxruntime backend does them (pure: the graph is given as GraphTensors)."""

from __future__ import annotations

import pytest

from tritium.config import ConfigError, config_to_json, parse_config_text
from tritium.config.backends import detect_backend
from tritium.config.onnx_complete import GraphTensor, complete_onnx_config
from tritium.config.onnx_types import (
    config_type_of_element,
    config_type_of_ort,
    element_number_of_config,
    ort_type_of_config,
)


def g(name: str, shape: tuple[int, ...], kind: str = "TYPE_FP32", optional: bool = False):
    return GraphTensor(name, kind, shape, "", optional)


ADD_SUB_IN = [g("INPUT0", (-1, 4)), g("INPUT1", (-1, 4))]
ADD_SUB_OUT = [g("OUTPUT0", (-1, 4)), g("OUTPUT1", (-1, 4))]


def complete(text: str, inputs=ADD_SUB_IN, outputs=ADD_SUB_OUT, **kw) -> dict:
    pb = parse_config_text(text, "m")
    if not pb.name:
        pb.name = "m"
    return config_to_json(complete_onnx_config(pb, inputs, outputs, **kw))


def failure(text: str, inputs=ADD_SUB_IN, outputs=ADD_SUB_OUT, **kw) -> str:
    with pytest.raises(ConfigError) as info:
        complete(text, inputs, outputs, **kw)
    assert info.value.phase == "load"
    return info.value.message


def test_empty_config_is_completed_from_a_batchable_graph() -> None:
    config = complete("")
    assert (config["backend"], config["platform"]) == ("onnxruntime", "onnxruntime_onnx")
    # Triton: every input and output has a variable first dim -> max_batch_size 4 and a
    # dynamic batcher.
    assert config["max_batch_size"] == 4
    assert "dynamic_batching" in config
    assert [(i["name"], i["data_type"], i["dims"]) for i in config["input"]] == [
        ("INPUT0", "TYPE_FP32", [4]),
        ("INPUT1", "TYPE_FP32", [4]),
    ]
    assert [o["name"] for o in config["output"]] == ["OUTPUT0", "OUTPUT1"]


def test_default_max_batch_size_comes_from_the_backend_setting() -> None:
    assert complete("", default_max_batch_size=16)["max_batch_size"] == 16
    one = complete("", default_max_batch_size=1)
    assert one["max_batch_size"] == 1 and "dynamic_batching" not in one
    off = complete("", default_max_batch_size=0)
    assert off["max_batch_size"] == 0
    assert off["input"][0]["dims"] == [-1, 4]


def test_sequence_batching_keeps_the_dynamic_batcher_out() -> None:
    config = complete("sequence_batching { }")
    assert "dynamic_batching" not in config and config["max_batch_size"] == 4


def test_fixed_shape_graph_does_not_batch() -> None:
    fixed_in = [g("INPUT0", (2, 4)), g("INPUT1", (2, 4))]
    fixed_out = [g("OUTPUT0", (2, 4)), g("OUTPUT1", (2, 4))]
    config = complete("", fixed_in, fixed_out)
    assert config["max_batch_size"] == 0 and "dynamic_batching" not in config
    assert config["input"][0]["dims"] == [2, 4]


def test_non_zero_max_batch_size_on_a_graph_that_cannot_batch_fails() -> None:
    fixed_in = [g("INPUT0", (2, 4)), g("INPUT1", (-1, 4))]
    message = failure("max_batch_size: 8", fixed_in)
    assert message == (
        "autofill failed for model 'm': model does not support batching while non-zero "
        "max_batch_size is specified"
    )
    # Without auto-complete the same configuration fails as well.
    assert "does not support batching" in failure(
        "max_batch_size: 8", fixed_in, auto_complete=False
    )


def test_scalar_per_item_becomes_dims_1_with_an_empty_reshape() -> None:
    config = complete("", [g("X", (-1,))], [g("Y", (-1,))])
    assert config["input"][0]["dims"] == [1]
    assert config["input"][0]["reshape"] == {"shape": []}
    assert config["output"][0]["reshape"] == {"shape": []}
    scalar = complete("", [g("X", ())], [g("Y", ())])
    assert scalar["max_batch_size"] == 0 and scalar["input"][0]["dims"] == [1]


def test_configured_tensors_are_kept_and_checked() -> None:
    text = (
        'max_batch_size: 8 input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 4 ] },'
        ' { name: "INPUT1" data_type: TYPE_FP32 dims: [ 4 ] } ]'
        ' output [ { name: "OUTPUT1" data_type: TYPE_FP32 dims: [ 4 ] } ]'
    )
    config = complete(text)
    assert [o["name"] for o in config["output"]] == ["OUTPUT1"]  # a subset is fine
    assert config["max_batch_size"] == 8 and "dynamic_batching" not in config


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            'input [ { name: "INPUTX" data_type: TYPE_FP32 dims: [ 4 ] } ]',
            "unexpected inference input 'INPUTX' for model 'm', allowed inputs are: INPUT0, INPUT1",
        ),
        (
            'input [ { name: "INPUT0" data_type: TYPE_INT32 dims: [ 4 ] },'
            ' { name: "INPUT1" data_type: TYPE_FP32 dims: [ 4 ] } ]',
            "unexpected datatype TYPE_INT32 for inference input 'INPUT0' of model 'm', "
            "expecting TYPE_FP32",
        ),
        (
            'input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 5 ] },'
            ' { name: "INPUT1" data_type: TYPE_FP32 dims: [ 4 ] } ]',
            "model 'm', tensor 'INPUT0': the model expects shape [4] after the batch dimension "
            "but the model configuration's dims is [5]",
        ),
        (
            'input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 4 ] } ]',
            "input 'INPUT1' of the ONNX model of 'm' is missing from the model configuration",
        ),
        (
            'output [ { name: "OUT" data_type: TYPE_FP32 dims: [ 4 ] } ]',
            "unexpected inference output 'OUT' for model 'm', allowed outputs are: OUTPUT0, OUTPUT1",
        ),
        (
            'output [ { name: "OUTPUT0" data_type: TYPE_FP16 dims: [ 4 ] } ]',
            "unexpected datatype TYPE_FP16 for inference output 'OUTPUT0' of model 'm', "
            "expecting TYPE_FP32",
        ),
    ],
)
def test_contradictions_fail_naming_the_tensor(text: str, expected: str) -> None:
    assert failure(text).startswith(expected)


def test_checks_hold_without_auto_complete() -> None:
    text = (
        'input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ -1, 4 ] },'
        ' { name: "INPUT1" data_type: TYPE_FP32 dims: [ -1, 3 ] } ]'
    )
    message = failure(text, auto_complete=False)
    assert "tensor 'INPUT1'" in message and "[-1,4]" in message
    # Nothing is filled in either.
    config = complete(
        'input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ -1, 4 ] },'
        ' { name: "INPUT1" data_type: TYPE_FP32 dims: [ -1, 4 ] } ]',
        auto_complete=False,
    )
    assert config["max_batch_size"] == 0 and config["output"] == []


def test_optional_inputs_may_be_configured_or_left_out() -> None:
    inputs = [*ADD_SUB_IN, g("BIAS", (4,), optional=True)]
    # Auto-complete leaves an optional input out, and the batch check ignores it.
    config = complete("", inputs)
    assert [i["name"] for i in config["input"]] == ["INPUT0", "INPUT1"]
    assert config["max_batch_size"] == 4
    text = (
        'input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ -1, 4 ] },'
        ' { name: "INPUT1" data_type: TYPE_FP32 dims: [ -1, 4 ] },'
        ' { name: "BIAS" data_type: TYPE_FP32 dims: [ 4 ] optional: true } ]'
    )
    assert len(complete(text, inputs, auto_complete=False)["input"]) == 3


def test_reshape_is_compared_with_the_graph() -> None:
    text = (
        'max_batch_size: 2 input [ { name: "X" data_type: TYPE_FP32 dims: [ 4 ]'
        " reshape { shape: [ 2, 2 ] } } ]"
    )
    complete(text, [g("X", (-1, 2, 2))], [g("Y", (-1, 2, 2))])
    assert "reshape is [2,2]" in failure(text, [g("X", (-1, 4))], [g("Y", (-1, 4))])


def test_a_graph_type_without_a_triton_type_fails_naming_it() -> None:
    weird = [GraphTensor("S", None, (-1,), "seq(tensor(float))")]
    assert failure("", weird, ADD_SUB_OUT).startswith(
        "input 'S' of the ONNX model of 'm' has type 'seq(tensor(float))'"
    )


@pytest.mark.parametrize(
    ("ort", "number", "config"),
    [
        ("tensor(float)", 1, "TYPE_FP32"),
        ("tensor(uint8)", 2, "TYPE_UINT8"),
        ("tensor(int8)", 3, "TYPE_INT8"),
        ("tensor(uint16)", 4, "TYPE_UINT16"),
        ("tensor(int16)", 5, "TYPE_INT16"),
        ("tensor(int32)", 6, "TYPE_INT32"),
        ("tensor(int64)", 7, "TYPE_INT64"),
        ("tensor(string)", 8, "TYPE_STRING"),
        ("tensor(bool)", 9, "TYPE_BOOL"),
        ("tensor(float16)", 10, "TYPE_FP16"),
        ("tensor(double)", 11, "TYPE_FP64"),
        ("tensor(uint32)", 12, "TYPE_UINT32"),
        ("tensor(uint64)", 13, "TYPE_UINT64"),
        ("tensor(bfloat16)", 16, "TYPE_BF16"),
    ],
)
def test_every_onnx_tensor_type_maps_both_ways(ort: str, number: int, config: str) -> None:
    assert config_type_of_ort(ort) == config
    assert config_type_of_ort(f"optional({ort})") == config
    assert config_type_of_element(number) == config
    assert ort_type_of_config(config) == ort
    assert element_number_of_config(config) == number


def test_unservable_onnx_types_have_no_triton_type() -> None:
    assert config_type_of_ort("seq(tensor(float))") is None
    assert config_type_of_ort("tensor(complex64)") is None
    assert config_type_of_element(14) is None


@pytest.mark.parametrize(
    ("backend", "platform", "filename", "files", "expected"),
    [
        ("", "", "", {"model.onnx"}, "onnxruntime"),
        ("", "", "", {"model.py"}, "python"),
        # Triton looks for the ONNX file before model.py.
        ("", "", "", {"model.onnx", "model.py"}, "onnxruntime"),
        ("python", "", "", {"model.onnx", "model.py"}, "python"),
        ("", "onnxruntime_onnx", "", set(), "onnxruntime"),
        ("", "", "net.onnx", {"net.onnx"}, "onnxruntime"),
        ("", "", "other.py", {"other.py"}, "python"),
        ("", "", "", {"model.plan"}, "tensorrt"),
        ("", "", "", set(), ""),
    ],
)
def test_backend_is_detected_as_triton_does(backend, platform, filename, files, expected) -> None:
    assert detect_backend(backend, platform, filename, files) == expected
