"""pb_utils config helpers, type maps, BYTES codec and ModelConfig — Triton's results and texts."""

from __future__ import annotations

import json

import numpy as np
import pytest

from tritium.backends.python import pb_utils
from tritium.backends.python.pb_utils import ModelConfig

CONFIG = {
    "name": "probe",
    "max_batch_size": 8,
    "input": [
        {"name": "IN", "data_type": "TYPE_STRING", "dims": [-1], "optional": False},
        {"name": "LATE", "data_type": "TYPE_INVALID", "dims": []},
    ],
    "output": [{"name": "OUT", "data_type": "TYPE_FP32", "dims": [4]}],
}


def _cfg(**overrides) -> ModelConfig:
    config = json.loads(json.dumps(CONFIG))
    config.update(overrides)
    return ModelConfig(json.dumps(config))


# -- lookups ----------------------------------------------------------------------------


def test_get_input_and_output_config_by_name():
    assert pb_utils.get_input_config_by_name(CONFIG, "IN")["data_type"] == "TYPE_STRING"
    assert pb_utils.get_input_config_by_name(CONFIG, "OUT") is None
    assert pb_utils.get_output_config_by_name(CONFIG, "OUT")["dims"] == [4]
    assert pb_utils.get_output_config_by_name(CONFIG, "IN") is None
    assert pb_utils.get_input_config_by_name({}, "IN") is None


def test_using_decoupled_model_transaction_policy():
    assert pb_utils.using_decoupled_model_transaction_policy(CONFIG) is False
    assert pb_utils.using_decoupled_model_transaction_policy(
        {"model_transaction_policy": {"decoupled": True}}
    )
    assert not pb_utils.using_decoupled_model_transaction_policy({"model_transaction_policy": {}})


# -- type maps --------------------------------------------------------------------------


def test_triton_string_to_numpy():
    assert pb_utils.triton_string_to_numpy("TYPE_FP32") is np.float32
    assert pb_utils.triton_string_to_numpy("TYPE_FP16") is np.float16
    assert pb_utils.triton_string_to_numpy("TYPE_STRING") is np.object_
    assert pb_utils.triton_string_to_numpy("TYPE_BOOL") is bool  # Triton maps to Python bool
    with pytest.raises(KeyError):
        pb_utils.triton_string_to_numpy("TYPE_BF16")


def test_triton_and_numpy_type_maps_are_inverse():
    for code in range(1, 14):
        np_type = pb_utils.triton_to_numpy_type(code)
        assert np_type is not None
        assert pb_utils.numpy_to_triton_type(np_type) == code
        assert pb_utils.numpy_to_triton_type(np.dtype(np_type)) == code
    assert pb_utils.triton_to_numpy_type(11) is np.float32
    assert pb_utils.triton_to_numpy_type(13) is np.object_
    assert pb_utils.triton_to_numpy_type(14) is None  # BF16 has no numpy type
    assert pb_utils.triton_to_numpy_type(0) is None


def test_numpy_to_triton_type_edge_cases():
    assert pb_utils.numpy_to_triton_type(np.bytes_) == 13
    assert pb_utils.numpy_to_triton_type(np.dtype("S5")) == 13
    assert pb_utils.numpy_to_triton_type(bool) == 1
    assert pb_utils.numpy_to_triton_type(np.complex64) is None
    assert pb_utils.numpy_to_triton_type(np.str_) is None
    assert pb_utils.numpy_to_triton_type("not a dtype") is None


# -- BYTES codec ------------------------------------------------------------------------


def test_serialize_byte_tensor_matches_triton():
    out = pb_utils.serialize_byte_tensor(np.array([b"ab", "c", 1], dtype=np.object_))
    assert out == b"\x02\x00\x00\x00ab\x01\x00\x00\x00c\x01\x00\x00\x001"
    assert isinstance(out, bytes)


def test_serialize_byte_tensor_c_order_of_2d():
    array = np.array([[b"a", b"b"], [b"c", b"d"]], dtype=np.object_).T  # non-contiguous
    out = pb_utils.serialize_byte_tensor(array)
    assert out == b"".join(b"\x01\x00\x00\x00" + c for c in (b"a", b"c", b"b", b"d"))


def test_serialize_byte_tensor_special_results():
    assert pb_utils.serialize_byte_tensor(np.array([], dtype=np.object_)) == ()
    assert pb_utils.serialize_byte_tensor(np.zeros(2, dtype=np.float32)) is None


def test_deserialize_bytes_tensor():
    out = pb_utils.deserialize_bytes_tensor(b"\x02\x00\x00\x00ab\x00\x00\x00\x00")
    assert out.dtype == np.object_
    assert out.tolist() == [b"ab", b""]
    empty = pb_utils.deserialize_bytes_tensor(b"")
    assert empty.shape == (0,)
    assert empty.dtype == np.object_


def test_bytes_round_trip_from_uint8_buffer():
    array = np.array([b"", b"\x00\x01", "\u00e9".encode()], dtype=np.object_)
    raw = np.frombuffer(pb_utils.serialize_byte_tensor(array), dtype=np.uint8)
    assert pb_utils.deserialize_bytes_tensor(raw).tolist() == array.tolist()


# -- ModelConfig ------------------------------------------------------------------------


def test_model_config_from_json_and_dict():
    assert _cfg().as_dict()["name"] == "probe"
    source = json.loads(json.dumps(CONFIG))
    cfg = ModelConfig(source)
    cfg.set_max_batch_size(16)
    assert source["max_batch_size"] == 8  # a dict argument is copied, not edited


def test_set_max_batch_size():
    cfg = _cfg()
    cfg.set_max_batch_size(16)
    assert cfg.as_dict()["max_batch_size"] == 16
    with pytest.raises(ValueError) as info:
        _cfg().set_max_batch_size(4)
    assert str(info.value) == (
        "configuration specified max_batch_size 8, but in auto-complete-config function "
        "for model 'probe' specified max_batch_size 4"
    )


def test_set_max_batch_size_on_sparse_config():
    cfg = ModelConfig('{"name": "m"}')
    cfg.set_max_batch_size(4)
    assert cfg.as_dict()["max_batch_size"] == 4


def test_set_dynamic_batching():
    cfg = _cfg()
    cfg.set_dynamic_batching()
    assert cfg.as_dict()["dynamic_batching"] == {}
    cfg = _cfg(dynamic_batching={"max_queue_delay_microseconds": 100})
    cfg.set_dynamic_batching()
    assert cfg.as_dict()["dynamic_batching"] == {"max_queue_delay_microseconds": 100}
    with pytest.raises(ValueError) as info:
        _cfg(sequence_batching={}).set_dynamic_batching()
    assert str(info.value) == (
        "Configuration specified scheduling_choice as 'sequence_batching', but "
        "auto-complete-config function for model 'probe' tries to set scheduling_choice "
        "as 'dynamic_batching'"
    )


def test_add_input_new_and_matching():
    cfg = _cfg()
    cfg.add_input({"name": "X", "data_type": "TYPE_FP32", "dims": [1], "optional": True})
    assert cfg.as_dict()["input"][-1] == {
        "name": "X",
        "data_type": "TYPE_FP32",
        "dims": [1],
        "optional": True,
    }
    before = json.dumps(cfg.as_dict())
    cfg.add_input({"name": "IN", "data_type": "TYPE_STRING", "dims": [-1]})
    assert json.dumps(cfg.as_dict()) == before  # same config: nothing added


def test_add_input_fills_an_incomplete_entry():
    cfg = _cfg()
    cfg.add_input({"name": "LATE", "data_type": "TYPE_INT32", "dims": [3]})
    late = pb_utils.get_input_config_by_name(cfg.as_dict(), "LATE")
    assert late["data_type"] == "TYPE_INT32"
    assert late["dims"] == [3]
    assert len(cfg.as_dict()["input"]) == 2


@pytest.mark.parametrize(
    ("tensor", "message"),
    [
        (
            {"name": "IN", "data_type": "TYPE_FP32", "dims": [-1]},
            "unable to load model 'probe', configuration expects datatype TYPE_STRING for "
            "input 'IN', model provides TYPE_FP32",
        ),
        (
            {"name": "IN", "data_type": "TYPE_STRING", "dims": [3]},
            "model 'probe', tensor 'IN': the model expects dims [3] but the model "
            "configuration specifies dims [-1]",
        ),
        (
            {"name": "IN", "data_type": "TYPE_STRING", "dims": [-1], "optional": True},
            "model 'probe', tensor 'IN': the model expects optional True but the model "
            "configuration specifies optional False",
        ),
        (
            {"data_type": "TYPE_FP32", "dims": [1]},
            "input in auto-complete-config function for model 'probe' is missing 'name' property.",
        ),
        (
            {"name": "X", "dims": [1]},
            "input 'X' in auto-complete-config function for model 'probe' is missing "
            "'data_type' property.",
        ),
        (
            {"name": "X", "data_type": "TYPE_FP32"},
            "input 'X' in auto-complete-config function for model 'probe' is missing 'dims' property.",
        ),
        (
            {"name": "X", "data_type": "TYPE_FP32", "dims": [1], "foo": 1},
            "input 'X' in auto-complete-config function for model 'probe' contains property "
            "other than 'name', 'data_type', 'dims' and 'optional'.",
        ),
    ],
)
def test_add_input_errors(tensor, message):
    with pytest.raises(ValueError) as info:
        _cfg().add_input(tensor)
    assert str(info.value) == message


def test_add_output():
    cfg = _cfg()
    cfg.add_output({"name": "NEW", "data_type": "TYPE_INT64", "dims": [2, 2]})
    assert pb_utils.get_output_config_by_name(cfg.as_dict(), "NEW")["dims"] == [2, 2]
    with pytest.raises(ValueError) as info:
        cfg.add_output({"name": "X", "data_type": "TYPE_FP32", "dims": [1], "optional": True})
    assert str(info.value) == (
        "output 'X' in auto-complete-config function for model 'probe' contains property "
        "other than 'name', 'data_type' and 'dims'."
    )
    with pytest.raises(ValueError) as info:
        cfg.add_output({"name": "OUT", "data_type": "TYPE_FP16", "dims": [4]})
    assert str(info.value) == (
        "unable to load model 'probe', configuration expects datatype TYPE_FP32 for output "
        "'OUT', model provides TYPE_FP16"
    )


def test_add_input_on_config_without_inputs():
    cfg = ModelConfig('{"name": "m"}')
    cfg.add_input({"name": "A", "data_type": "TYPE_FP32", "dims": [1]})
    assert cfg.as_dict()["input"] == [{"name": "A", "data_type": "TYPE_FP32", "dims": [1]}]


def test_set_model_transaction_policy():
    cfg = _cfg()
    cfg.set_model_transaction_policy({"decoupled": False})
    assert cfg.as_dict()["model_transaction_policy"] == {"decoupled": False}
    cfg.set_model_transaction_policy({"decoupled": False})  # same value is fine
    with pytest.raises(ValueError) as info:
        cfg.set_model_transaction_policy({"decoupled": True})
    assert str(info.value) == (
        "trying to change decoupled property in auto-complete-config for model 'probe', "
        "which is already set to 'False'."
    )
    with pytest.raises(ValueError) as info:
        _cfg().set_model_transaction_policy({"foo": 1})
    assert str(info.value) == (
        "model transaction property in auto-complete-config function for model 'probe' "
        "contains property other than 'decoupled'."
    )
