"""Byte-level tests of the infer response encoder.

Expected bodies are the ones Triton 2.51's HTTP endpoint writes for the same outputs.
"""

from __future__ import annotations

import struct

import numpy as np
import orjson
import pytest

from tritium.core.errors import InternalError, InvalidArgument, Unsupported
from tritium.core.types import InferResponse, OutputTensor
from tritium.frontends.http.infer_encode import encode_infer_response
from tritium.frontends.http.output_prefs import OutputPref, OutputPrefs


def response(*outputs: OutputTensor, **kw) -> InferResponse:
    return InferResponse(kw.pop("model", "m"), kw.pop("version", "1"), outputs=list(outputs), **kw)


def out(name: str, datatype: str, array) -> OutputTensor:
    array = np.asarray(array)
    return OutputTensor(name, datatype, tuple(array.shape), array)


def body(chunks) -> bytes:
    return b"".join(bytes(c) for c in chunks)


def test_json_response_matches_triton_bytes():
    resp = response(out("OUTPUT0", "FP32", np.array([1, 2, 3], np.float32)))
    chunks, header_length = encode_infer_response(resp, OutputPrefs())
    assert header_length is None
    assert body(chunks) == (
        b'{"model_name":"m","model_version":"1","outputs":[{"name":"OUTPUT0",'
        b'"datatype":"FP32","shape":[3],"data":[1.0,2.0,3.0]}]}'
    )


def test_id_and_parameters_key_order():
    resp = response(
        out("O", "INT32", np.array([7], np.int32)),
        id="abc",
        parameters={"s": "x", "i": 1, "b": True, "f": 0.5},
    )
    chunks, _ = encode_infer_response(resp, OutputPrefs())
    assert body(chunks) == (
        b'{"id":"abc","model_name":"m","model_version":"1",'
        b'"parameters":{"s":"x","i":1,"b":true,"f":0.5},'
        b'"outputs":[{"name":"O","datatype":"INT32","shape":[1],"data":[7]}]}'
    )


def test_request_id_is_echoed_when_the_response_has_none():
    chunks, _ = encode_infer_response(
        response(out("O", "INT8", np.array([1], np.int8))), OutputPrefs(), request_id="r9"
    )
    assert orjson.loads(body(chunks))["id"] == "r9"


def test_bytes_response_parameter_is_unsupported():
    resp = response(out("O", "INT8", np.array([1], np.int8)), parameters={"p": b"x"})
    with pytest.raises(Unsupported):
        encode_infer_response(resp, OutputPrefs())


def test_fp32_is_written_as_triton_writes_it():
    # Triton widens each float to double: 0.1f -> 0.10000000149011612
    resp = response(out("O", "FP32", np.array([0.1, 1e-45], np.float32)))
    chunks, _ = encode_infer_response(resp, OutputPrefs())
    assert b'"data":[0.10000000149011612,1.401298464324817e-45]' in body(chunks)


@pytest.mark.parametrize(
    "datatype,array,text",
    [
        ("BOOL", np.array([[True, False]]), b"[true,false]"),
        ("INT8", np.array([-1, 44], np.int8), b"[-1,44]"),
        ("UINT64", np.array([2**64 - 1], np.uint64), b"[18446744073709551615]"),
        ("INT64", np.array([-(2**63)], np.int64), b"[-9223372036854775808]"),
        ("FP64", np.array([1e-300, 0.1]), b"[1e-300,0.1]"),
        (
            "BYTES",
            np.array([b"hi", "\u00e9x".encode(), b""], dtype=object),
            '["hi","\u00e9x",""]'.encode(),
        ),
        ("BYTES", np.array(["as str"]), b'["as str"]'),
    ],
)
def test_json_data_per_datatype(datatype, array, text):
    chunks, _ = encode_infer_response(response(out("O", datatype, array)), OutputPrefs())
    assert b'"data":' + text + b"}" in body(chunks)


def test_non_finite_floats_use_triton_spelling():
    resp = response(
        out("A", "FP32", np.array([np.nan, 1, -np.inf], np.float32)),
        out("B", "BYTES", np.array([b"null"], dtype=object)),
        out("C", "FP64", np.array([0.1, np.inf])),
    )
    chunks, _ = encode_infer_response(resp, OutputPrefs())
    text = body(chunks)
    assert b'"data":[NaN,1.0,-Infinity]' in text
    assert b'"data":["null"]' in text
    assert b'"data":[0.1,Infinity]' in text


def test_invalid_utf8_bytes_become_replacement_characters_in_json():
    resp = response(out("O", "BYTES", np.array([b"\xff"], dtype=object)))
    chunks, _ = encode_infer_response(resp, OutputPrefs())
    assert orjson.loads(body(chunks))["outputs"][0]["data"] == ["\ufffd"]


@pytest.mark.parametrize("datatype", ["FP16", "BF16"])
def test_half_precision_json_output_is_refused_as_triton_does(datatype):
    array = np.array([1, 2], np.float16 if datatype == "FP16" else np.uint16)
    with pytest.raises(InvalidArgument) as info:
        encode_infer_response(response(out("O", datatype, array)), OutputPrefs())
    assert info.value.message == (
        f"sending {datatype} data via JSON is not supported. Please use the binary data "
        "format for output"
    )


def test_binary_outputs_follow_the_header_in_output_order():
    a = np.array([1, 2, 3], np.float32)
    b = np.array([b"\xff", b"abc"], dtype=object)
    resp = response(out("A", "FP32", a), out("B", "BYTES", b), out("C", "INT32", np.array([5])))
    prefs = OutputPrefs(by_name={"A": OutputPref(binary=True), "B": OutputPref(binary=True)})
    chunks, header_length = encode_infer_response(resp, prefs)
    raw = body(chunks)
    header = raw[:header_length]
    assert header == (
        b'{"model_name":"m","model_version":"1","outputs":['
        b'{"name":"A","datatype":"FP32","shape":[3],"parameters":{"binary_data_size":12}},'
        b'{"name":"B","datatype":"BYTES","shape":[2],"parameters":{"binary_data_size":12}},'
        b'{"name":"C","datatype":"INT32","shape":[1],"data":[5]}]}'
    )
    assert raw[header_length:] == (
        a.tobytes() + struct.pack("<I", 1) + b"\xff" + struct.pack("<I", 3) + b"abc"
    )


def test_default_binary_applies_to_unnamed_outputs():
    resp = response(out("A", "FP16", np.array([1.5], np.float16)))
    chunks, header_length = encode_infer_response(resp, OutputPrefs(default_binary=True))
    assert body(chunks)[header_length:] == np.array([1.5], np.float16).tobytes()


def test_binary_output_of_non_native_layout_is_little_endian_and_contiguous():
    big_endian = np.array([[1, 2], [3, 4]], dtype=">i4")[:, ::-1]
    resp = response(OutputTensor("A", "INT32", (2, 2), big_endian))
    chunks, n = encode_infer_response(resp, OutputPrefs(default_binary=True))
    assert body(chunks)[n:] == np.array([[2, 1], [4, 3]], "<i4").tobytes()


def test_zero_size_binary_output_has_no_binary_part():
    resp = response(out("A", "FP32", np.zeros((0,), np.float32)))
    chunks, header_length = encode_infer_response(resp, OutputPrefs(default_binary=True))
    assert header_length is None
    assert b'"parameters":{"binary_data_size":0}' in body(chunks)


def test_shared_memory_output_carries_no_data():
    resp = response(out("A", "FP32", np.zeros(2, np.float32)))
    prefs = OutputPrefs(by_name={"A": OutputPref(shared_memory=True)})
    chunks, _ = encode_infer_response(resp, prefs)
    assert orjson.loads(body(chunks))["outputs"] == [
        {"name": "A", "datatype": "FP32", "shape": [2]}
    ]


def test_shape_that_does_not_match_the_data_is_internal():
    resp = response(OutputTensor("A", "FP32", (4,), np.zeros(3, np.float32)))
    with pytest.raises(InternalError) as info:
        encode_infer_response(resp, OutputPrefs())
    assert info.value.message == "output tensor shape does not match size of output for 'A'"
