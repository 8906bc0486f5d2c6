"""Request plans and serialised responses give exactly what the protobuf reference path
gives: the same core requests, the same errors, the same response bytes."""

from __future__ import annotations

import numpy as np
import pytest
from google.protobuf.message import DecodeError
from tritonclient.grpc import service_pb2

from tritium.core.errors import InvalidArgument
from tritium.core.types import InferResponse, OutputTensor
from tritium.frontends.grpc import infer_plans
from tritium.frontends.grpc.infer_codec import decode_infer_request, encode_infer_response
from tritium.frontends.grpc.infer_plans import RequestPlans, scan
from tritium.frontends.grpc.infer_response_bytes import (
    SplitMessage,
    encode_infer_response_bytes,
    encode_infer_response_split,
    stream_response_bytes,
)


def _request(request_id: str = "", values=(1.0, 2.0, 3.0, 4.0), **params) -> bytes:
    message = service_pb2.ModelInferRequest(model_name="add_sub", id=request_id)
    for key, value in params.items():
        message.parameters[key].int64_param = value
    message.inputs.add(name="INPUT0", datatype="FP32", shape=[4])
    message.inputs.add(name="TEXT", datatype="BYTES", shape=[1])
    message.outputs.add(name="OUTPUT0")
    message.raw_input_contents.append(np.asarray(values, np.float32).tobytes())
    message.raw_input_contents.append(b"\x02\0\0\0hi")
    return message.SerializeToString()


def _same(a, b) -> None:
    assert (a.model_name, a.model_version, a.id, a.parameters, a.priority) == (
        b.model_name, b.model_version, b.id, b.parameters, b.priority
    )  # fmt: skip
    assert [(t.name, t.datatype, t.shape, t.parameters) for t in a.inputs] == [
        (t.name, t.datatype, t.shape, t.parameters) for t in b.inputs
    ]
    for x, y in zip(a.inputs, b.inputs):
        np.testing.assert_array_equal(x.data, y.data)
    assert [(o.name, o.parameters) for o in a.outputs] == [
        (o.name, o.parameters) for o in b.outputs
    ]


def test_repeated_headers_are_decoded_from_the_plan_like_the_reference():
    plans = RequestPlans()
    for request_id, values in (("a", (1, 2, 3, 4)), ("b", (5, 6, 7, 8)), ("", (0, 0, 0, 1))):
        data = _request(request_id, values, priority=3)
        got = plans.decode(data)
        _same(got, decode_infer_request(service_pb2.ModelInferRequest.FromString(data)))
    assert len(plans) == 1  # the id is not part of the key
    assert got.layout_key is not None


def test_a_plan_hit_with_a_wrong_size_answers_the_reference_error():
    plans = RequestPlans()
    plans.decode(_request("x"))
    bad = _request("y", values=(1.0, 2.0, 3.0))
    with pytest.raises(InvalidArgument) as info:
        plans.decode(bad)
    with pytest.raises(InvalidArgument) as reference:
        decode_infer_request(service_pb2.ModelInferRequest.FromString(bad))
    assert info.value.message == reference.value.message
    assert info.value.message.startswith("[request id: y] input byte size mismatch")


def _shm_request(request_id: str, offset: int, raw_second: bool) -> bytes:
    message = service_pb2.ModelInferRequest(model_name="identity", id=request_id)
    shm = message.inputs.add(name="INPUT0", datatype="FP32", shape=[4])
    shm.parameters["shared_memory_region"].string_param = "in"
    shm.parameters["shared_memory_byte_size"].int64_param = 16
    shm.parameters["shared_memory_offset"].int64_param = offset
    if raw_second:
        message.inputs.add(name="INPUT1", datatype="FP32", shape=[4])
        message.raw_input_contents.append(np.arange(4, dtype=np.float32).tobytes())
    out = message.outputs.add(name="OUTPUT0")
    out.parameters["shared_memory_region"].string_param = "out"
    out.parameters["shared_memory_byte_size"].int64_param = 16
    return message.SerializeToString()


@pytest.mark.parametrize("raw_second", [False, True])
def test_shared_memory_requests_are_planned_like_the_reference(raw_second):
    plans = RequestPlans()
    for request_id, offset in (("a", 0), ("b", 0), ("c", 16), ("d", 16)):
        data = _shm_request(request_id, offset, raw_second)
        got = plans.decode(data)
        reference = decode_infer_request(service_pb2.ModelInferRequest.FromString(data))
        _same(got, reference)
        assert got.shared_memory and reference.shared_memory
    assert len(plans) == 2  # one plan per region layout; the id is not part of the key
    assert got.layout_key is not None
    # Each request gets its own parameter dicts: the service may fill in the data.
    again = plans.decode(_shm_request("e", 16, raw_second))
    assert again.inputs[0].parameters is not got.inputs[0].parameters


def test_unusual_field_order_takes_the_reference_path():
    data = _request("q")
    # The id field moved after the raw contents: still valid protobuf.
    header, request_id, raws = scan(data)
    assert request_id == "q" and [bytes(r) for r in raws][1] == b"\x02\0\0\0hi"
    moved = data.replace(b"\x1a\x01q", b"") + b"\x1a\x01q"
    assert scan(moved) is None
    assert RequestPlans().decode(moved).id == "q"


def _fixed_request(request_id: str = "", model: str = "identity", count: int = 4) -> bytes:
    """Fixed-size inputs only (two raw contents), as perf_analyzer sends them."""
    message = service_pb2.ModelInferRequest(model_name=model, id=request_id)
    message.inputs.add(name="INPUT0", datatype="FP32", shape=[1, count])
    message.inputs.add(name="INPUT1", datatype="INT8", shape=[1, 3])
    message.outputs.add(name="OUTPUT0")
    message.raw_input_contents.append(np.arange(count, dtype=np.float32).tobytes())
    message.raw_input_contents.append(b"\x01\x02\x03")
    return message.SerializeToString()


def _decode_both(plans: RequestPlans, data: bytes):
    """(what the plans give, what the reference gives): a request or the error's text."""
    results = []
    for decode in (plans.decode, lambda d: decode_infer_request(
        service_pb2.ModelInferRequest.FromString(d)
    )):  # fmt: skip
        try:
            results.append(decode(data))
        except InvalidArgument as exc:
            results.append(exc.message)
        except DecodeError:  # e.g. an id that is not UTF-8
            results.append("DecodeError")
    return results


def test_a_repeated_layout_is_split_without_a_scan(monkeypatch):
    plans = RequestPlans()
    plans.decode(_fixed_request("first"))
    plans.decode(_fixed_request("second"))  # built from the plan: its layout is kept
    scans = []
    monkeypatch.setattr(infer_plans, "scan", lambda data: scans.append(data) or scan(data))
    for request_id in ("3", "", "x" * 127, "ünï"):
        data = _fixed_request(request_id)
        got, reference = _decode_both(plans, memoryview(b"\0" * 5 + data)[5:])
        _same(got, reference)
    assert scans == []


@pytest.mark.parametrize(
    "variant",
    [
        _fixed_request("y" * 200),  # an id whose length takes two bytes
        _fixed_request("z", model="identitx"),  # another header of the same length
        _fixed_request("z", model="identity2"),
        _fixed_request("z", count=5),  # other raw sizes (and shape)
        _fixed_request("z") + b"\x1a\x01q",  # a field after the raw contents
        _fixed_request("z").replace(b"\x03\x01\x02\x03", b"\x02\x01\x02"),  # short raw
        _fixed_request("ab").replace(b"\x1a\x02ab", b"\x1a\x02\xff\xfe"),  # not UTF-8
    ],
)
def test_other_layouts_decode_like_the_reference(variant):
    plans = RequestPlans()
    plans.decode(_fixed_request("first"))
    plans.decode(_fixed_request("second"))
    got, reference = _decode_both(plans, variant)
    if isinstance(reference, str):
        assert got == reference
    else:
        _same(got, reference)
    # The layout that was kept still applies to the usual message afterwards.
    got, reference = _decode_both(plans, _fixed_request("third"))
    _same(got, reference)


@pytest.mark.parametrize("request_id", ["", "abc"])
def test_serialised_responses_equal_protobuf_serialisation(request_id):
    outputs = [
        OutputTensor("O0", "FP32", (4,), np.arange(4, dtype=np.float32)),
        OutputTensor("O1", "BYTES", (2,), np.array([b"a", b"bc"], dtype=object)),
        OutputTensor("O2", "INT64", (2, 2), np.arange(4).reshape(2, 2).T),  # not contiguous
        OutputTensor("O3", "FP32", (0,), np.zeros(0, np.float32)),
        OutputTensor("O4", "FP16", (), np.ones((), np.float16)),
    ]
    shm = OutputTensor("O5", "FP32", (2,), np.zeros(2, np.float32), shared_memory=True)
    for response in (
        InferResponse("add_sub", "1", "", [*outputs, shm]),
        InferResponse("add_sub", "1", "own", outputs, parameters={"k": 1}),
        InferResponse("add_sub", "1", "", outputs[:1]),  # one output: its own cache key
        InferResponse("add_sub", "1", "", outputs[2:3]),
        InferResponse("add_sub", "1", "", [shm]),
        InferResponse("add_sub", "1", "", []),
    ):
        expected = encode_infer_response(response, request_id).SerializeToString()
        for _ in range(2):  # the second time from the cached skeleton
            assert encode_infer_response_bytes(response, request_id) == expected
    reply = service_pb2.ModelStreamInferResponse(
        infer_response=encode_infer_response(response, request_id)
    )
    assert stream_response_bytes(expected) == reply.SerializeToString()


def test_big_responses_are_kept_in_parts_over_the_output_memory():
    big = np.arange(256 * 1024, dtype=np.float32)  # 1 MiB
    small = np.arange(4, dtype=np.float32)
    response = InferResponse(
        "m",
        "1",
        "id7",
        [OutputTensor("A", "FP32", small.shape, small), OutputTensor("B", "FP32", big.shape, big)],
    )
    split = encode_infer_response_split(response)
    assert type(split) is SplitMessage
    assert split.joined() == encode_infer_response_bytes(response)
    assert len(split) == len(split.joined())
    assert any(isinstance(p, memoryview) and p.obj is big for p in split.parts)  # no copy
    response.outputs = response.outputs[:1]
    assert encode_infer_response_split(response) == encode_infer_response_bytes(response)
