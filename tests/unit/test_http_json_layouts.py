"""JSON infer bodies: layout keys (validation reuse), shared default preferences, and the
flat FP32 fast path giving exactly what the general path gives."""

from __future__ import annotations

import numpy as np
import orjson
import pytest

from tritium.core.errors import InvalidArgument
from tritium.frontends.http.infer_decode import decode_infer_request
from tritium.frontends.http.json_tensors import decode_json_data, flatten
from tritium.service.model.signature import ModelSignature, TensorSpec


def decode(doc: dict):
    body = orjson.dumps(doc)
    return decode_infer_request("m", "", body, len(body))


def body(shape=(1, 4), data=(1.0, 2.0, 3.0, 4.0), **extra) -> dict:
    return {
        "inputs": [{"name": "IN", "datatype": "FP32", "shape": list(shape), "data": list(data)}],
        **extra,
    }


def test_requests_with_one_layout_share_a_key_and_others_do_not():
    key = decode(body())[0].layout_key
    assert key is not None
    assert decode(body(data=(5.0, 6.0, 7.0, 8.0)))[0].layout_key == key  # data is not layout
    others = [
        body(shape=(2, 2)),
        body(id="a"),
        body(outputs=[{"name": "OUT"}]),
        {"inputs": [{"name": "X", "datatype": "FP32", "shape": [1, 4], "data": [1, 2, 3, 4]}]},
        {"inputs": [{"name": "IN", "datatype": "INT32", "shape": [1, 4], "data": [1, 2, 3, 4]}]},
    ]
    keys = {decode(doc)[0].layout_key for doc in others}
    assert key not in keys and len(keys) == len(others)


@pytest.mark.parametrize(
    "extra",
    [
        {"parameters": {"app": "x"}},
        {"parameters": {"sequence_id": 3, "sequence_start": True}},
    ],
)
def test_requests_with_parameters_or_flags_get_no_key(extra):
    # The worker reuses an exec message per key; parameters and flags are part of it.
    assert decode(body(**extra))[0].layout_key is None


def test_a_layout_found_valid_does_not_let_another_through():
    signature = ModelSignature("m", 8, [TensorSpec("IN", "FP32", (4,))], [])
    good = decode(body())[0]
    signature.validate(good)
    again = decode(body(data=(9.0, 9.0, 9.0, 9.0)))[0]
    signature.validate(again)
    assert again.batch_size == 1
    wrong = decode(body(shape=(2, 2)))[0]
    with pytest.raises(InvalidArgument, match="unexpected shape for input 'IN'"):
        signature.validate(wrong)


def test_default_preferences_are_shared_and_explicit_ones_are_not():
    _, first = decode(body())
    _, second = decode(body())
    assert first is second and not first.default_binary and not first.by_name
    _, binary = decode(body(parameters={"binary_data_output": True}))
    _, named = decode(body(outputs=[{"name": "OUT", "parameters": {"binary_data": True}}]))
    assert binary is not first and binary.default_binary
    assert named is not first and named.get("OUT").binary
    assert not first.default_binary and not first.by_name  # untouched by the others


@pytest.mark.parametrize(
    "data",
    [
        [1, 2.5, -3, 4e38],
        [0.0, 1.0, 0.0, 1.0],
        [1e39, -1e39, 0.5, 2**70],  # saturates to +-inf; big integers are numbers too
    ],
)
def test_flat_fp32_fast_path_matches_the_general_conversion(data):
    fast = decode_json_data("IN", "m", "FP32", (2, 2), 4, data)
    flat, _ = flatten(data)
    with np.errstate(over="ignore"):
        general = np.array(flat, dtype=np.float64).astype(np.float32).reshape(2, 2)
    assert fast.dtype == np.float32 and fast.shape == (2, 2)
    np.testing.assert_array_equal(fast, general)


@pytest.mark.parametrize(
    "data, message",
    [
        ([1.0, True, 2.0, 3.0], "non-number as double"),
        ([1.0, "x", 2.0, 3.0], "non-number as double"),
        ([1.0, None, 2.0, 3.0], "non-number as double"),
        ([10**400, 1.0, 2.0, 3.0], "non-number as double"),
        ([1.0, 2.0, 3.0], "expected 4 elements, got 3"),
    ],
)
def test_flat_fp32_fast_path_leaves_errors_to_the_general_path(data, message):
    with pytest.raises(InvalidArgument, match=message):
        decode_json_data("IN", "m", "FP32", (4,), 4, data)


def test_nested_fp32_data_is_still_flattened():
    out = decode_json_data("IN", "m", "FP32", (2, 2), 4, [[1, 2], [3, 4]])
    np.testing.assert_array_equal(out, [[1, 2], [3, 4]])
