"""SequenceTensors: control inputs as Triton shapes and types them, implicit state."""

from __future__ import annotations

import numpy as np
import pytest

from tritium.core import InferRequest, InferResponse, OutputTensor, RequestedOutput
from tritium.core.errors import InvalidArgument
from tritium.scheduling.sequence_config import SequenceConfig
from tritium.scheduling.sequence_tensors import SequenceTensors, load_initial_states


def model_config(max_batch_size=4, corrid="TYPE_UINT64", state=None, outputs=("OUT",)):
    batching = {
        "control_input": [
            {"name": "S", "control": [{"kind": "CONTROL_SEQUENCE_START", "int32_false_true": [0, 1]}]},
            {"name": "E", "control": [{"kind": "CONTROL_SEQUENCE_END", "fp32_false_true": [0.5, 2.5]}]},
            {"name": "R", "control": [{"kind": "CONTROL_SEQUENCE_READY", "bool_false_true": [False, True]}]},
            {"name": "C", "control": [{"kind": "CONTROL_SEQUENCE_CORRID", "data_type": corrid}]},
        ],
        "oldest": {"max_candidate_sequences": 4},
    }
    if state is not None:
        batching["state"] = state
    return {
        "name": "m",
        "max_batch_size": max_batch_size,
        "output": [{"name": n} for n in outputs],
        "sequence_batching": batching,
    }


def added(tensors: SequenceTensors, key, start, end, state=None) -> dict:
    request = InferRequest("m")
    tensors.add_inputs(request, start, end, tensors.corrid_tensor(key), state)
    return {t.name: t for t in request.inputs}


@pytest.mark.parametrize("max_batch_size,shape", [(4, (1, 1)), (0, (1,))])
def test_boolean_controls_take_their_pair_and_triton_shape(max_batch_size, shape):
    tensors = SequenceTensors(SequenceConfig.from_config(model_config(max_batch_size)))
    got = added(tensors, 9, True, False)
    assert [(n, t.datatype, t.shape) for n, t in got.items()] == [
        ("S", "INT32", shape), ("E", "FP32", shape), ("R", "BOOL", shape), ("C", "UINT64", shape)
    ]
    assert got["S"].data.reshape(-1).tolist() == [1]
    assert got["E"].data.reshape(-1).tolist() == [0.5]
    assert got["R"].data.reshape(-1).tolist() == [True]
    assert got["C"].data.dtype == np.uint64 and got["C"].data.reshape(-1).tolist() == [9]
    got = added(tensors, 9, False, True)
    assert got["S"].data.reshape(-1).tolist() == [0]
    assert got["E"].data.reshape(-1).tolist() == [2.5]
    assert not got["S"].data.flags.writeable


@pytest.mark.parametrize(
    "corrid,key,dtype,value",
    [
        ("TYPE_UINT64", 2**64 - 1, np.uint64, 2**64 - 1),
        ("TYPE_INT64", 2**63 + 5, np.int64, -(2**63) + 5),
        ("TYPE_UINT32", 2**32 + 7, np.uint32, 7),
        ("TYPE_INT32", 2**31, np.int32, -(2**31)),
        ("TYPE_INT32", "text", np.int32, 0),
        ("TYPE_STRING", "seq-a", np.object_, b"seq-a"),
        ("TYPE_STRING", 42, np.object_, b"42"),
    ],
)
def test_corrid_in_every_datatype(corrid, key, dtype, value):
    tensors = SequenceTensors(SequenceConfig.from_config(model_config(corrid=corrid)))
    tensor = tensors.corrid_tensor(key)
    assert tensor.data.dtype == dtype and tensor.shape == (1, 1)
    assert tensor.data[0, 0] == value


STATE = [
    {
        "input_name": "IN_A",
        "output_name": "OUT_A",
        "data_type": "TYPE_INT32",
        "dims": [2],
        "initial_state": [{"data_type": "TYPE_INT32", "dims": ["2"], "name": "a", "data_file": "a.bin"}],
    },
    {
        "input_name": "IN_B",
        "output_name": "OUT_B",
        "data_type": "TYPE_FP32",
        "dims": [3],
        "initial_state": [{"data_type": "TYPE_FP32", "dims": ["3"], "name": "b", "zero_data": True}],
    },
]


def test_initial_state_from_data_file_and_zero_data(tmp_path):
    cfg = model_config(state=STATE, outputs=("OUT", "OUT_B"))
    (tmp_path / "initial_state").mkdir()
    (tmp_path / "initial_state" / "a.bin").write_bytes(np.array([3, 4], np.int32).tobytes())
    tensors = SequenceTensors(SequenceConfig.from_config(cfg), load_initial_states(cfg, tmp_path))
    got = added(tensors, 1, True, False)
    assert got["IN_A"].data.tolist() == [[3, 4]]
    assert got["IN_B"].data.tolist() == [[0.0, 0.0, 0.0]] and got["IN_B"].data.dtype == np.float32

    # The model's outputs become the next state; only what the client asked for stays.
    request = InferRequest("m")
    hidden = tensors.request_state_outputs(request)
    assert [o.name for o in request.outputs] == ["OUT", "OUT_B", "OUT_A"]
    assert hidden == {"OUT_A"}
    response = InferResponse("m", "1")
    response.outputs = [
        OutputTensor("OUT", "INT32", (1, 1), np.array([[1]], np.int32)),
        OutputTensor("OUT_A", "INT32", (1, 2), np.array([[5, 6]], np.int32)),
        OutputTensor("OUT_B", "FP32", (1, 3), np.array([[1, 2, 3]], np.float32)),
    ]
    state = tensors.take_state(response, hidden, None)
    assert [o.name for o in response.outputs] == ["OUT", "OUT_B"]
    assert added(tensors, 1, False, False, state)["IN_A"].data.tolist() == [[5, 6]]
    assert added(tensors, 1, True, False, state)["IN_A"].data.tolist() == [[3, 4]]  # START


def test_named_outputs_get_the_state_outputs_added_and_hidden():
    tensors = SequenceTensors(SequenceConfig.from_config(model_config(state=STATE[1:])))
    request = InferRequest("m", outputs=[RequestedOutput("OUT")])
    assert tensors.request_state_outputs(request) == {"OUT_B"}
    assert [o.name for o in request.outputs] == ["OUT", "OUT_B"]


def test_missing_or_wrong_sized_data_file_fails_the_load(tmp_path):
    cfg = model_config(state=STATE[:1])
    with pytest.raises(InvalidArgument, match="file 'a.bin' not found"):
        load_initial_states(cfg, tmp_path)
    (tmp_path / "initial_state").mkdir()
    (tmp_path / "initial_state" / "a.bin").write_bytes(b"\0" * 5)
    with pytest.raises(InvalidArgument, match="holds 5 bytes, expected 8"):
        load_initial_states(cfg, tmp_path)


def test_strategy_settings_are_read():
    cfg = SequenceConfig.from_config(model_config())
    assert (cfg.strategy, cfg.slots_per_instance, cfg.max_batch) == ("oldest", 4, 4)
    direct = SequenceConfig.from_config({"name": "d", "max_batch_size": 0, "sequence_batching": {}})
    assert (direct.strategy, direct.slots_per_instance, direct.batching) == ("direct", 1, False)
