"""Byte-level tests of the infer request decoder (JSON, binary extension, raw body).

Error texts pinned here are the ones Triton 2.51's HTTP endpoint answers (its core's
messages without the "[request id: ...]" prefix); where Triton has no message or
crashes, the text is ours and says which input is wrong.
"""

from __future__ import annotations

import struct
import warnings

import numpy as np
import orjson
import pytest

from tritium.core.errors import InvalidArgument
from tritium.frontends.http.infer_decode import decode_infer_request, parse_header_length
from tritium.frontends.http.infer_parameters import FLAG_SEQUENCE_END, FLAG_SEQUENCE_START
from tritium.frontends.http.raw_request import decode_raw_request


def decode(doc: object, binary: bytes = b"", model: str = "m", version: str = ""):
    header = doc if isinstance(doc, bytes) else orjson.dumps(doc)
    return decode_infer_request(model, version, header + binary, len(header))


def one(datatype: str, shape: list, data: object, **extra) -> dict:
    return {"inputs": [{"name": "IN", "datatype": datatype, "shape": shape, "data": data}], **extra}


def binary_input(datatype: str, shape: list, size: int, name: str = "IN") -> dict:
    return {
        "name": name,
        "datatype": datatype,
        "shape": shape,
        "parameters": {"binary_data_size": size},
    }


def error_of(doc: object, binary: bytes = b"") -> str:
    with pytest.raises(InvalidArgument) as info:
        decode(doc, binary)
    return info.value.message


# ------------------------------------------------------------------ JSON data


def test_flat_json_fp32_request_fields():
    req, prefs = decode(one("FP32", [3], [1, 2.5, 3]), model="ident", version="2")
    assert req.model_name == "ident" and req.model_version == "2"
    assert req.id == "" and req.outputs is None and req.parameters == {}
    (tensor,) = req.inputs
    assert (tensor.name, tensor.datatype, tensor.shape) == ("IN", "FP32", (3,))
    assert tensor.data.dtype == np.float32
    np.testing.assert_array_equal(tensor.data, [1, 2.5, 3])
    assert not prefs.default_binary and prefs.by_name == {}


def test_nested_and_ragged_json_data_is_flattened_row_major():
    # Triton accepts any nesting as long as the element count matches the shape.
    req, _ = decode(one("INT32", [2, 3], [[1, 2, 3], [4, [5, [6]]]]))
    np.testing.assert_array_equal(req.inputs[0].data, [[1, 2, 3], [4, 5, 6]])
    assert req.inputs[0].data.shape == (2, 3)


@pytest.mark.parametrize(
    "datatype,data,expected",
    [
        ("BOOL", [True, False], np.array([True, False])),
        ("INT8", [1, -2], np.array([1, -2], np.int8)),
        ("INT16", [300, -300], np.array([300, -300], np.int16)),
        ("INT32", [2**31 - 1, -(2**31)], np.array([2**31 - 1, -(2**31)], np.int32)),
        ("INT64", [2**63 - 1, -(2**63)], np.array([2**63 - 1, -(2**63)], np.int64)),
        ("UINT8", [0, 255], np.array([0, 255], np.uint8)),
        ("UINT16", [65535, 1], np.array([65535, 1], np.uint16)),
        ("UINT32", [2**32 - 1, 1], np.array([2**32 - 1, 1], np.uint32)),
        ("UINT64", [2**64 - 1, 1], np.array([2**64 - 1, 1], np.uint64)),
        ("FP32", [0.1, 2], np.array([0.1, 2], np.float32)),
        ("FP64", [1e-300, 0.1], np.array([1e-300, 0.1], np.float64)),
    ],
)
def test_every_json_datatype(datatype, data, expected):
    req, _ = decode(one(datatype, [2], data))
    got = req.inputs[0].data
    assert got.dtype == expected.dtype
    np.testing.assert_array_equal(got, expected)


def test_json_bytes_are_utf8_encoded_strings():
    req, _ = decode(one("BYTES", [3], ["hi", "", "\u00e9x"]))
    data = req.inputs[0].data
    assert data.dtype == object
    assert list(data) == [b"hi", b"", "\u00e9x".encode()]


def test_narrow_integers_wrap_like_triton():
    # Triton 2.51 answers INT8 [300] with 44 (a C cast), it does not reject it.
    req, _ = decode(one("INT8", [1], [300]))
    assert req.inputs[0].data.tolist() == [44]


def test_fp32_overflow_becomes_infinity_without_warning():
    with warnings.catch_warnings(record=True) as caught:
        req, _ = decode(one("FP32", [2], [1e300, -1e300]))
    assert req.inputs[0].data.tolist() == [np.inf, -np.inf]
    assert not [w for w in caught if issubclass(w.category, RuntimeWarning)]


def test_zero_element_input():
    req, _ = decode(one("FP32", [0, 4], []))
    assert req.inputs[0].data.shape == (0, 4)


@pytest.mark.parametrize(
    "datatype,data,message",
    [
        ("FP32", ["a", 1], "Unable to parse 'data': attempt to access JSON non-number as double"),
        ("FP32", [True, 1], "Unable to parse 'data': attempt to access JSON non-number as double"),
        ("INT8", [1.5, 2], "attempt to access JSON non-signed-integer as signed-integer"),
        ("INT64", [2**63, 1], "attempt to access JSON non-signed-integer as signed-integer"),
        ("UINT8", [-1, 2], "attempt to access JSON non-unsigned-integer as unsigned-integer"),
        ("BOOL", [1, 0], "Unable to parse 'data': attempt to access JSON non-boolean as boolean"),
        ("BYTES", [1, 2], "Unable to parse JSON bytes array: attempt to access JSON non-string"),
    ],
)
def test_json_values_of_the_wrong_kind(datatype, data, message):
    text = error_of(one(datatype, [2], data))
    assert message in text and "'IN'" in text


@pytest.mark.parametrize(
    "datatype,number,message",
    [
        # orjson reads integers beyond 64 bits as doubles, and rejects beyond-double ones
        ("UINT64", b"18446744073709551616", "attempt to access JSON non-unsigned-integer"),
        ("INT64", b"-9223372036854775809", "attempt to access JSON non-signed-integer"),
        ("FP64", b"1e400", "failed to parse the request JSON buffer"),
    ],
)
def test_json_numbers_beyond_64_bits(datatype, number, message):
    body = b'{"inputs":[{"name":"IN","datatype":"%s","shape":[1],"data":[%s]}]}' % (
        datatype.encode(),
        number,
    )
    assert message in error_of(body)


@pytest.mark.parametrize("datatype", ["FP16", "BF16"])
def test_half_precision_json_is_refused_as_triton_does(datatype):
    assert error_of(one(datatype, [1], [1.0])) == (
        f"receiving {datatype} data via JSON is not supported. Please use the binary data "
        "format for input IN"
    )


def test_element_count_mismatch_names_the_input():
    for data in ([1, 2], [1, 2, 3, 4]):
        text = error_of(one("FP32", [3], data))
        assert text.startswith(
            "Unable to parse 'data': Shape does not match true shape of 'data' field"
        )
        assert f"input 'IN' (expected 3 elements, got {len(data)})" in text


def test_bytes_count_mismatch_uses_triton_string_messages():
    assert error_of(one("BYTES", [3], ["a", "b"])) == (
        "expected 3 string elements for inference input 'IN' for model 'm', got 2"
    )
    assert error_of(one("BYTES", [2], ["a", "b", "c"])) == (
        "unexpected number of string elements 3 for inference input 'IN' for model 'm', expecting 2"
    )


def test_huge_shapes_are_rejected_before_anything_is_allocated():
    # 2**124 elements: must be a 400, never a MemoryError or an overflow.
    text = error_of(one("FP32", [2**62, 2**62], [1, 2, 3]))
    assert "expected 21267647932558653966460912964485513216 elements, got 3" in text
    text = error_of({"inputs": [binary_input("FP32", [2**62, 2**62], 12)]}, b"\0" * 12)
    assert text == (
        "[request id: <id_unknown>] input byte size mismatch for input 'IN' for model 'm'. "
        "Expected 85070591730234615865843651857942052864, got 12"
    )


@pytest.mark.parametrize("shape", [[-1], [1.5], ["3"], [True], [2**63]])
def test_bad_shape_dims(shape):
    text = error_of(one("FP32", shape, [1]))
    assert text.startswith(
        "Unable to parse 'shape': attempt to access JSON non-unsigned-integer as unsigned-integer"
    )


def test_deeply_nested_json_is_a_400_not_a_crash():
    deep = b"[" * 100_000 + b"1" + b"]" * 100_000
    body = b'{"inputs":[{"name":"IN","datatype":"FP32","shape":[1],"data":' + deep + b"}]}"
    text = error_of(body)
    assert text.startswith("failed to parse the request JSON buffer:")


def test_nesting_that_json_allows_is_flattened_iteratively():
    deep = [[[[[[[[1.0]]]]]]]] * 3
    req, _ = decode(one("FP32", [3], deep))
    assert req.inputs[0].data.tolist() == [1.0, 1.0, 1.0]


# --------------------------------------------------------- request structure


@pytest.mark.parametrize(
    "doc,message",
    [
        (b"{bad json", "failed to parse the request JSON buffer:"),
        (b"[1, 2]", "Unable to parse 'inputs': attempt to access non-existing object member"),
        ({}, "Unable to parse 'inputs': attempt to access non-existing object member 'inputs'"),
        ({"inputs": {}}, "Unable to parse 'inputs': attempt to access JSON non-array as array"),
        ({"id": 5, "inputs": []}, "Unable to parse 'id': attempt to access JSON non-string"),
        (
            {"inputs": [{"datatype": "FP32", "shape": [1], "data": [1]}]},
            "Unable to parse 'name': attempt to access non-existing object member 'name'",
        ),
        (
            {"inputs": [{"name": "IN", "shape": [1], "data": [1]}]},
            "Unable to parse 'datatype': attempt to access non-existing object member 'datatype'",
        ),
        (
            {"inputs": [{"name": "IN", "datatype": "FP32", "data": [1]}]},
            "Unable to parse 'shape': attempt to access non-existing object member 'shape'",
        ),
        (
            {"inputs": [{"name": "IN", "datatype": "FP32", "shape": 3, "data": [1]}]},
            "Unable to parse 'shape': attempt to access JSON non-array as array",
        ),
        (one("FP99", [1], [1]), "invalid datatype for input IN"),
        (one("FP32", [1], 5), "Unable to parse 'data': attempt to access JSON non-array as array"),
        (
            {"inputs": [{"name": "IN", "datatype": "FP32", "shape": [1]}]},
            "Input must set only one of the following fields: 'data', 'binary_data_size' in "
            "'parameters', 'shared_memory_region' in 'parameters'. But no field is set",
        ),
        (
            {"inputs": [dict(binary_input("FP32", [1], 4), data=[1])]},
            "Input must set only one of the following fields: 'data', 'binary_data_size' in "
            "'parameters', 'shared_memory_region' in 'parameters'. But set 'data' "
            "'binary_data_size'",
        ),
        (
            {"inputs": [one("FP32", [1], [1])["inputs"][0]] * 2},
            "[request id: <id_unknown>] input 'IN' already exists in request",
        ),
    ],
)
def test_malformed_requests(doc, message):
    assert error_of(doc).startswith(message)


# ----------------------------------------------------------------- parameters


def test_sequence_priority_timeout_go_to_fields_and_are_stripped():
    params = {
        "sequence_id": 42,
        "sequence_start": True,
        "sequence_end": True,
        "priority": 3,
        "timeout": 1500,
        "binary_data_output": True,
        "custom": "x",
        "n": 1,
        "f": 1.5,
        "b": False,
    }
    req, prefs = decode(one("FP32", [1], [1], id="r1", parameters=params))
    assert req.id == "r1"
    assert req.correlation_id == 42
    assert req.flags == FLAG_SEQUENCE_START | FLAG_SEQUENCE_END
    assert req.priority == 3 and req.timeout_us == 1500
    assert prefs.default_binary is True
    assert req.parameters == {"custom": "x", "n": 1, "f": 1.5, "b": False}


def test_string_sequence_id_and_false_flags():
    params = {"sequence_id": "corr-7", "sequence_start": False, "sequence_end": False}
    req, _ = decode(one("FP32", [1], [1], parameters=params))
    assert req.correlation_id == "corr-7" and req.flags == 0


@pytest.mark.parametrize(
    "params,message",
    [
        ({"sequence_id": -1}, "Unable to parse 'sequence_id'"),
        (
            {"sequence_start": 1},
            "Unable to parse 'sequence_start': attempt to access JSON non-boolean",
        ),
        (
            {"priority": -1},
            "Unable to parse 'priority': attempt to access JSON non-unsigned-integer",
        ),
        (
            {"timeout": "1"},
            "Unable to parse 'timeout': attempt to access JSON non-unsigned-integer",
        ),
        ({"binary_data_output": 1}, "Unable to parse 'binary_data_output'"),
        (
            {"triton_x": 1},
            "parameter keys starting with 'triton_' are reserved for Triton usage and should "
            "not be specified.",
        ),
        (
            {"foo": [1]},
            "parameter 'foo' has invalid type. It should be either 'int', 'bool', or 'string'.",
        ),
        (5, "failed to get request params."),
    ],
)
def test_bad_parameters(params, message):
    assert error_of(one("FP32", [1], [1], parameters=params)).startswith(message)


# -------------------------------------------------------------------- outputs


def test_requested_outputs_and_their_preferences():
    outputs = [
        {"name": "A", "parameters": {"binary_data": True}},
        {"name": "B", "parameters": {"classification": 3}},
        {"name": "C"},
    ]
    req, prefs = decode(one("FP32", [1], [1], outputs=outputs))
    assert [o.name for o in req.outputs] == ["A", "B", "C"]
    assert req.outputs[0].parameters == {"binary_data": True}
    assert prefs.get("A").binary and not prefs.get("C").binary
    assert prefs.get("B").class_count == 3
    assert prefs.wants_classification
    assert not prefs.get("unnamed").binary  # default: JSON


def test_repeated_output_is_passed_on_for_the_service_to_reject():
    # Triton silently keeps the first entry; tritium keeps every entry so the service's
    # validation can answer 400 naming the repeated output.
    outputs = [{"name": "A", "parameters": {"binary_data": True}}, {"name": "A"}]
    req, prefs = decode(one("FP32", [1], [1], outputs=outputs))
    assert [o.name for o in req.outputs] == ["A", "A"]
    assert prefs.get("A").binary


def test_empty_outputs_list_is_not_none():
    req, _ = decode(one("FP32", [1], [1], outputs=[]))
    assert req.outputs == []


@pytest.mark.parametrize(
    "outputs,message",
    [
        ("x", "Unable to parse 'outputs': attempt to access JSON non-array as array"),
        ([{}], "Unable to parse 'name': attempt to access non-existing object member 'name'"),
        (
            [{"name": "A", "parameters": {"binary_data": "yes"}}],
            "Unable to parse 'binary_data': attempt to access JSON non-boolean as boolean",
        ),
        (
            [{"name": "A", "parameters": {"classification": -1}}],
            "Unable to set 'classification': attempt to access JSON non-unsigned-integer",
        ),
        (
            [{"name": "A", "parameters": {"shared_memory_region": "r", "classification": 1}}],
            "Output can't set both 'shared_memory_region' and 'classification'",
        ),
        (
            [{"name": "A", "parameters": {"shared_memory_region": "r", "binary_data": True}}],
            "Output can't set both 'shared_memory_region' and 'binary_data'",
        ),
    ],
)
def test_bad_outputs(outputs, message):
    assert error_of(one("FP32", [1], [1], outputs=outputs)).startswith(message)


# -------------------------------------------------------------- binary inputs


def test_binary_inputs_are_views_over_the_body_in_order():
    a = np.array([1, 2, 3], np.float32).tobytes()
    b = np.array([[7, 8], [9, 10]], np.int64).tobytes()
    doc = {"inputs": [binary_input("FP32", [3], 12, "A"), binary_input("INT64", [2, 2], 32, "B")]}
    header = orjson.dumps(doc)
    body = header + a + b
    req, _ = decode_infer_request("m", "", body, len(header))
    ta, tb = req.inputs
    np.testing.assert_array_equal(ta.data, [1, 2, 3])
    np.testing.assert_array_equal(tb.data, [[7, 8], [9, 10]])
    assert not ta.data.flags.owndata and np.shares_memory(ta.data, np.frombuffer(body, np.uint8))
    assert ta.parameters == {} and tb.parameters == {}


@pytest.mark.parametrize(
    "datatype,array",
    [
        ("BOOL", np.array([True, False, True])),
        ("INT8", np.array([-1, 2], np.int8)),
        ("UINT16", np.array([1, 65535], np.uint16)),
        ("INT32", np.array([-5, 5], np.int32)),
        ("UINT64", np.array([2**64 - 1], np.uint64)),
        ("FP16", np.array([1.5, -2.25], np.float16)),
        ("FP64", np.array([0.1], np.float64)),
        ("BF16", np.array([0x3F80, 0x4000], np.uint16)),
    ],
)
def test_every_fixed_size_binary_datatype(datatype, array):
    raw = array.tobytes()
    req, _ = decode({"inputs": [binary_input(datatype, list(array.shape), len(raw))]}, raw)
    data = req.inputs[0].data
    assert data.tobytes() == raw
    assert data.shape == array.shape


def test_binary_bytes_elements():
    raw = struct.pack("<I", 1) + b"\xff" + struct.pack("<I", 3) + b"abc"
    req, _ = decode({"inputs": [binary_input("BYTES", [2], len(raw))]}, raw)
    assert list(req.inputs[0].data) == [b"\xff", b"abc"]


@pytest.mark.parametrize(
    "shape,raw,message",
    [
        (
            [3],
            struct.pack("<I", 1) + b"a" + struct.pack("<I", 1) + b"b",
            "expected 3 string elements for inference input 'IN' for model 'm', got 2",
        ),
        (
            [1],
            struct.pack("<I", 1) + b"a" + struct.pack("<I", 1) + b"b",
            "unexpected number of string elements 2 for inference input 'IN' for model 'm', "
            "expecting 1",
        ),
        (
            [2],
            struct.pack("<I", 1) + b"a" + struct.pack("<I", 3) + b"ab",
            "incomplete string data for inference input 'IN', expecting string of length 3 "
            "but only 2 bytes available",
        ),
        (
            [2],
            struct.pack("<I", 1) + b"a" + b"\x01\x00",
            "incomplete string length indicator for inference input 'IN' for model 'm', "
            "expecting 4 bytes but only 2 bytes available.",
        ),
    ],
)
def test_binary_bytes_errors(shape, raw, message):
    # Triton tags binary-data errors with the request id (here unknown), all but one.
    text = error_of({"inputs": [binary_input("BYTES", shape, len(raw))]}, raw)
    tag = "" if message.startswith("incomplete string data") else "[request id: <id_unknown>] "
    assert text.startswith(tag + message)


def test_binary_size_errors_match_triton():
    data = np.array([1, 2, 3], np.float32).tobytes()
    # declared more than the body holds
    assert error_of({"inputs": [binary_input("FP32", [3], 16)]}, data) == (
        "unexpected size for input 'IN', expecting 4 additional bytes for model 'm'"
    )
    # declared less than the body holds
    assert error_of({"inputs": [binary_input("FP32", [3], 8)]}, data) == (
        "unexpected additional input data for model 'm'"
    )
    # consistent with the body but not with the shape
    assert error_of({"inputs": [binary_input("FP32", [3], 8)]}, data[:8]) == (
        "[request id: <id_unknown>] input byte size mismatch for input 'IN' for model 'm'. "
        "Expected 12, got 8"
    )
    for size in (-1, "12", 1.5):
        assert error_of({"inputs": [binary_input("FP32", [3], size)]}, data).startswith(
            "Unable to parse 'binary_data_size': attempt to access JSON non-unsigned-integer"
        )


def test_zero_size_binary_input():
    req, _ = decode({"inputs": [binary_input("FP32", [0], 0)]})
    assert req.inputs[0].data.shape == (0,)


def test_shared_memory_input_keeps_its_parameters_for_the_service():
    params = {"shared_memory_region": "r0", "shared_memory_byte_size": 12, "x": 1}
    doc = {"inputs": [{"name": "IN", "datatype": "FP32", "shape": [3], "parameters": params}]}
    req, _ = decode(doc)
    tensor = req.inputs[0]
    assert tensor.parameters == params
    assert tensor.data.size == 0


# ------------------------------------------------------------ header length


@pytest.mark.parametrize(
    "value,body_length,expected", [(None, 50, 50), ("0", 50, 0), ("50", 50, 50), (" 7 ", 9, 7)]
)
def test_header_length(value, body_length, expected):
    assert parse_header_length(value, body_length) == expected


@pytest.mark.parametrize(
    "value,message",
    [
        ("abc", "Unable to parse Inference-Header-Content-Length, got: abc"),
        ("", "Unable to parse Inference-Header-Content-Length, got: "),
        ("20abc", "Unable to parse Inference-Header-Content-Length, got: 20abc"),
        ("-5", "inference header size should be in range (0, 118), got: -5"),
        ("119", "inference header size should be in range (0, 118), got: 119"),
    ],
)
def test_bad_header_length(value, message):
    with pytest.raises(InvalidArgument) as info:
        parse_header_length(value, 118)
    assert info.value.message == message


def test_header_length_shorter_than_the_json():
    body = orjson.dumps(one("FP32", [1], [1]))
    with pytest.raises(InvalidArgument) as info:
        decode_infer_request("m", "", body, 10)
    assert info.value.message.startswith("failed to parse the request JSON buffer:")


# ------------------------------------------------------------------ raw body


def config(dims, data_type="TYPE_FP32", max_batch_size=0, inputs=1) -> dict:
    spec = {"name": "INPUT0", "data_type": data_type, "dims": dims}
    return {"max_batch_size": max_batch_size, "input": [spec] * inputs}


def test_raw_body_fills_the_variable_dimension():
    body = np.array([1, 2, 3], np.float32).tobytes()
    req, prefs = decode_raw_request("m", "", body, config([-1]))
    (tensor,) = req.inputs
    assert (tensor.name, tensor.datatype, tensor.shape) == ("INPUT0", "FP32", (3,))
    np.testing.assert_array_equal(tensor.data, [1, 2, 3])
    assert prefs.default_binary  # Triton answers raw requests in binary


def test_raw_body_for_a_batching_model_gets_batch_one():
    body = np.arange(3, dtype=np.float32).tobytes()
    req, _ = decode_raw_request("m", "", body, config(["3"], max_batch_size=8))
    assert req.inputs[0].shape == (1, 3)


def test_raw_body_bytes_is_one_element_not_length_prefixed():
    req, _ = decode_raw_request("m", "", b"hello", config([1], "TYPE_STRING"))
    assert req.inputs[0].datatype == "BYTES"
    assert req.inputs[0].shape == (1,)
    assert list(req.inputs[0].data) == [b"hello"]


@pytest.mark.parametrize(
    "cfg,body,message",
    [
        (
            config([4], inputs=2),
            b"\0" * 16,
            "Raw request must only have 1 input (found 1) to be deduced but got 2 inputs in "
            "'m' model configuration",
        ),
        (
            config([-1], "TYPE_STRING"),
            b"hi",
            "For BYTE datatype raw input 'INPUT0', the model must have input shape [1]",
        ),
        (
            config([-1, -1]),
            b"\0" * 8,
            "The shape of the raw input 'INPUT0' can not be deduced because there are more "
            "than one variable-sized dimension",
        ),
        (
            config([-1]),
            b"\0" * 5,
            "input byte size mismatch for input 'INPUT0' for model 'm'. Expected 4, got 5",
        ),
        (
            config([4]),
            b"\0" * 12,
            "input byte size mismatch for input 'INPUT0' for model 'm'. Expected 16, got 12",
        ),
    ],
)
def test_raw_body_errors(cfg, body, message):
    with pytest.raises(InvalidArgument) as info:
        decode_raw_request("m", "", body, cfg)
    assert info.value.message == message
