"""An ONNX model under sequence batching: the control inputs and implicit state tensors the
sequence batcher supplies are the graph's but not the configuration's inputs and outputs."""

from __future__ import annotations

import pytest

from tritium.config import ConfigError, config_to_json, parse_config_text
from tritium.config.onnx_complete import GraphTensor, complete_onnx_config

INPUTS = [
    GraphTensor("INPUT", "TYPE_FP32", (-1, 1)),
    GraphTensor("START", "TYPE_FP32", (-1, 1)),
    GraphTensor("STATE_IN", "TYPE_FP32", (-1, 1)),
]
OUTPUTS = [
    GraphTensor("OUTPUT", "TYPE_FP32", (-1, 1)),
    GraphTensor("STATE_OUT", "TYPE_FP32", (-1, 1)),
]
SEQUENCE = (
    "sequence_batching {\n"
    '  control_input [ { name: "START" control [ { kind: CONTROL_SEQUENCE_START'
    " fp32_false_true: [ 0, 1 ] } ] } ]\n"
    '  state [ { input_name: "STATE_IN" output_name: "STATE_OUT" data_type: TYPE_FP32'
    " dims: [ 1 ] } ]\n"
    "}\n"
)


def complete(text: str, inputs=INPUTS, outputs=OUTPUTS) -> dict:
    pb = parse_config_text(text, "acc")
    pb.name = "acc"
    return config_to_json(complete_onnx_config(pb, inputs, outputs))


def failure(text: str, inputs=INPUTS, outputs=OUTPUTS) -> str:
    with pytest.raises(ConfigError) as info:
        complete(text, inputs, outputs)
    assert info.value.phase == "load"
    return info.value.message


def test_auto_complete_leaves_the_sequence_batchers_tensors_out() -> None:
    config = complete(SEQUENCE)
    assert [i["name"] for i in config["input"]] == ["INPUT"]
    assert [o["name"] for o in config["output"]] == ["OUTPUT"]
    # Batchable, but sequence batching is the scheduler: no dynamic batcher is added.
    assert config["max_batch_size"] == 4 and "dynamic_batching" not in config


def test_a_written_config_need_not_list_them() -> None:
    text = (
        "max_batch_size: 8\n"
        'input [ { name: "INPUT" data_type: TYPE_FP32 dims: [ 1 ] } ]\n'
        'output [ { name: "OUTPUT" data_type: TYPE_FP32 dims: [ 1 ] } ]\n' + SEQUENCE
    )
    assert [i["name"] for i in complete(text)["input"]] == ["INPUT"]


def test_without_sequence_batching_the_control_input_is_missing() -> None:
    text = 'input [ { name: "INPUT" data_type: TYPE_FP32 dims: [ 1 ] } ]\n'
    assert "input 'START' of the ONNX model of 'acc' is missing" in failure(text)


def test_a_control_input_the_graph_lacks_is_named() -> None:
    inputs = [t for t in INPUTS if t.name != "START"]
    assert failure(SEQUENCE, inputs) == (
        "sequence batching input 'START' of model 'acc' is not an input of its ONNX model, "
        "whose inputs are: INPUT, STATE_IN"
    )


def test_a_control_of_another_type_than_the_graphs_is_refused() -> None:
    text = SEQUENCE.replace("fp32_false_true", "int32_false_true")
    assert failure(text) == (
        "control input 'START' of model 'acc' is TYPE_INT32 in the sequence batching but "
        "TYPE_FP32 in its ONNX model"
    )


def test_a_state_must_match_the_graphs_type_and_dims() -> None:
    wrong_type = SEQUENCE.replace("data_type: TYPE_FP32", "data_type: TYPE_INT64")
    assert failure(wrong_type) == (
        "unexpected datatype TYPE_INT64 for inference input 'STATE_IN' of model 'acc', "
        "expecting TYPE_FP32"
    )
    wrong_dims = SEQUENCE.replace("dims: [ 1 ]", "dims: [ 3 ]")
    assert "tensor 'STATE_IN': the model expects shape [1]" in failure(wrong_dims)


def test_a_state_output_the_graph_lacks_is_named() -> None:
    outputs = [t for t in OUTPUTS if t.name != "STATE_OUT"]
    assert failure(SEQUENCE, outputs=outputs) == (
        "state output 'STATE_OUT' of model 'acc' is not an output of its ONNX model, "
        "whose outputs are: OUTPUT"
    )


def test_a_correlation_id_control_takes_its_data_type() -> None:
    corrid = SEQUENCE.replace(
        "  state [",
        '  control_input [ { name: "CORRID" control [ { kind: CONTROL_SEQUENCE_CORRID'
        " data_type: TYPE_UINT64 } ] } ]\n  state [",
    )
    with_corrid = [*INPUTS, GraphTensor("CORRID", "TYPE_UINT64", (-1, 1))]
    assert [i["name"] for i in complete(corrid, with_corrid)["input"]] == ["INPUT"]
    as_int32 = [*INPUTS, GraphTensor("CORRID", "TYPE_INT32", (-1, 1))]
    assert failure(corrid, as_int32) == (
        "control input 'CORRID' of model 'acc' is TYPE_UINT64 in the sequence batching but "
        "TYPE_INT32 in its ONNX model"
    )
