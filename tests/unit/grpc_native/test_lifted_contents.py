"""Big ``ModelInferRequest`` messages are parsed by protobuf without their raw contents,
which stay views of the received bytes: the same request (or the same error) as
protobuf's parse of the whole message, without copying 64 MiB on the event loop."""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest
from google.protobuf.message import DecodeError
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tritonclient.grpc import service_pb2

from tritium.core.errors import TritiumError
from tritium.frontends.grpc import infer_plans
from tritium.frontends.grpc.infer_codec import decode_infer_request
from tritium.frontends.grpc.infer_plans import RequestPlans

DATATYPES = ["BOOL", "UINT8", "INT32", "INT64", "FP16", "FP32", "BYTES"]


def _outcome(decode, data: bytes):  # noqa: ANN001, ANN202
    try:
        request = decode(data)
    except DecodeError:
        return ("decode-error",)
    except TritiumError as exc:
        return ("error", exc.message)
    return (
        "ok",
        request.id,
        request.parameters,
        [(t.name, t.datatype, t.shape, t.parameters, t.data.tolist()) for t in request.inputs],
        None if request.outputs is None else [(o.name, o.parameters) for o in request.outputs],
    )


def _reference(data: bytes):  # noqa: ANN202
    return decode_infer_request(service_pb2.ModelInferRequest.FromString(data))


@settings(
    max_examples=300,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(
    request_id=st.text(max_size=4),
    tensors=st.lists(
        st.tuples(
            st.sampled_from(["IN", "INPUT0"]),
            st.sampled_from(DATATYPES),
            st.lists(st.integers(-1, 4), max_size=3),
            st.binary(max_size=24),
        ),
        max_size=3,
    ),
    outputs=st.lists(st.sampled_from(["OUT", "OUTPUT0"]), max_size=2),
    flips=st.lists(st.tuples(st.integers(0, 300), st.integers(0, 255)), max_size=2),
)
def test_lifted_contents_decode_as_protobuf_does(
    monkeypatch, request_id: str, tensors: list, outputs: list, flips: list
) -> None:  # noqa: ANN001
    monkeypatch.setattr(infer_plans, "LIFTED_BYTES", 0)
    message = service_pb2.ModelInferRequest(model_name="m", id=request_id)
    message.parameters["priority"].int64_param = 2
    for name, datatype, shape, raw in tensors:
        message.inputs.add(name=name, datatype=datatype, shape=shape)
        message.raw_input_contents.append(raw)
    for name in outputs:
        message.outputs.add(name=name)
    data = bytearray(message.SerializeToString())
    for position, value in flips:
        data[position % len(data)] = value
    expected = _outcome(_reference, bytes(data))
    assert _outcome(RequestPlans().decode, bytes(data)) == expected


def test_a_64_mib_tensor_is_not_copied() -> None:
    count = 16 * 2**20
    message = service_pb2.ModelInferRequest(model_name="identity", id="big")
    message.inputs.add(name="INPUT0", datatype="FP32", shape=[1, count])
    message.raw_input_contents.append(np.arange(count, dtype=np.float32).tobytes())
    data = message.SerializeToString()
    del message
    tracemalloc.start()
    try:
        request = RequestPlans().decode(data)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    tensor = request.inputs[0].data
    assert tensor.shape == (1, count) and tensor[0, -1] == count - 1
    # protobuf's parse copied the contents (64 MiB) and reading them copied them again.
    assert peak < 1 << 20, f"{peak} bytes"


@pytest.mark.parametrize("size", [infer_plans.LIFTED_BYTES - 64, infer_plans.LIFTED_BYTES])
def test_both_sides_of_the_threshold_decode_alike(size: int) -> None:
    message = service_pb2.ModelInferRequest(model_name="identity")
    message.inputs.add(name="INPUT0", datatype="UINT8", shape=[size])
    message.raw_input_contents.append(bytes(range(256)) * (size // 256) + bytes(size % 256))
    data = message.SerializeToString()
    assert _outcome(RequestPlans().decode, data) == _outcome(_reference, data)
