"""Inference over HTTP with the real tritonclient against a real server process."""

from __future__ import annotations

import numpy as np
import pytest
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

ALL_TYPES = {
    "BOOL": np.bool_,
    "UINT8": np.uint8,
    "UINT16": np.uint16,
    "UINT32": np.uint32,
    "UINT64": np.uint64,
    "INT8": np.int8,
    "INT16": np.int16,
    "INT32": np.int32,
    "INT64": np.int64,
    "FP16": np.float16,
    "FP32": np.float32,
    "FP64": np.float64,
    "BYTES": np.object_,
}


def _sample(dtype: type) -> np.ndarray:
    if dtype is np.object_:
        return np.array([b"hello", "wörld".encode(), b"", b"\x00\xff"], dtype=np.object_)
    if dtype is np.bool_:
        return np.array([True, False, True, True])
    info = np.iinfo(dtype) if np.issubdtype(dtype, np.integer) else None
    if info is not None:
        return np.array([info.min, 0, 1, info.max], dtype=dtype)
    return np.array([-1.5, 0.0, 2.25, 1e3], dtype=dtype)


def _add_sub(client, a, b, *, binary=True, outputs=None, request_id=""):
    inputs = [httpclient.InferInput("INPUT0", [4], "FP32"), httpclient.InferInput("INPUT1", [4], "FP32")]
    inputs[0].set_data_from_numpy(a, binary_data=binary)
    inputs[1].set_data_from_numpy(b, binary_data=binary)
    req_outputs = None
    if outputs is not None:
        req_outputs = [httpclient.InferRequestedOutput(n, binary_data=binary) for n in outputs]
    return client.infer("add_sub", inputs, outputs=req_outputs, request_id=request_id)


@pytest.mark.parametrize("binary", [True, False])
def test_add_sub(http_client, binary):
    a = np.array([1, 2, 3, 4], np.float32)
    b = np.array([10, 20, 30, 40], np.float32)
    result = _add_sub(http_client, a, b, binary=binary, request_id="req-7")
    np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), a + b)
    np.testing.assert_array_equal(result.as_numpy("OUTPUT1"), a - b)
    response = result.get_response()
    assert response["model_name"] == "add_sub"
    assert response["model_version"] == "1"
    assert response["id"] == "req-7"


def test_requested_output_subset(http_client):
    a = np.ones(4, np.float32)
    result = _add_sub(http_client, a, a, outputs=["OUTPUT1"])
    assert [o["name"] for o in result.get_response()["outputs"]] == ["OUTPUT1"]
    np.testing.assert_array_equal(result.as_numpy("OUTPUT1"), np.zeros(4, np.float32))
    assert result.as_numpy("OUTPUT0") is None


@pytest.mark.parametrize("wire", sorted(ALL_TYPES))
@pytest.mark.parametrize("binary", [True, False])
def test_every_datatype_round_trip(http_client, wire, binary):
    if wire in ("FP16",) and not binary:
        pytest.skip("FP16 travels in binary form only")
    data = _sample(ALL_TYPES[wire])
    if wire == "BYTES" and not binary:
        data = data[:3]  # JSON carries BYTES as UTF-8 strings
    config_name = "STRING" if wire == "BYTES" else wire
    inp = httpclient.InferInput(f"IN_{config_name}", list(data.shape), wire)
    inp.set_data_from_numpy(data, binary_data=binary)
    out = httpclient.InferRequestedOutput(f"OUT_{config_name}", binary_data=binary)
    result = http_client.infer("echo_all", [inp], outputs=[out])
    got = result.as_numpy(f"OUT_{config_name}")
    assert got.shape == data.shape
    if wire == "BYTES":
        # tritonclient hands JSON BYTES back as str, binary ones as bytes.
        assert [x.encode() if isinstance(x, str) else x for x in got] == list(data)
    else:
        assert got.dtype == data.dtype
        np.testing.assert_array_equal(got, data)


def test_bf16_binary_round_trip(http_client):
    import ml_dtypes  # tritonclient depends on it

    values = np.array([1.0, -2.0, 0.5, 3.0], dtype=ml_dtypes.bfloat16)
    inp = httpclient.InferInput("IN_BF16", [4], "BF16")
    inp.set_data_from_numpy(values, binary_data=True)
    out = httpclient.InferRequestedOutput("OUT_BF16", binary_data=True)
    result = http_client.infer("echo_all", [inp], outputs=[out])
    got = result.as_numpy("OUT_BF16")
    np.testing.assert_array_equal(got.astype(np.float32), values.astype(np.float32))


def test_batched_identity(http_client):
    data = np.arange(12, dtype=np.float32).reshape(3, 4)
    inp = httpclient.InferInput("INPUT0", [3, 4], "FP32")
    inp.set_data_from_numpy(data)
    result = http_client.infer("identity", [inp])
    np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), data)


def test_string_model(http_client):
    text = np.array(["héllo".encode(), b"abc"], dtype=np.object_)
    inp = httpclient.InferInput("TEXT", [2], "BYTES")
    inp.set_data_from_numpy(text)
    result = http_client.infer("string_upper", [inp])
    assert list(result.as_numpy("UPPER")) == ["HÉLLO".encode(), b"ABC"]
    np.testing.assert_array_equal(result.as_numpy("LENGTH"), np.array([5, 3], np.int32))


def test_reshape_applied_before_the_model(http_client):
    inp = httpclient.InferInput("IN", [2, 6], "FP32")
    inp.set_data_from_numpy(np.zeros((2, 6), np.float32))
    result = http_client.infer("reshape", [inp])
    np.testing.assert_array_equal(result.as_numpy("SHAPE"), np.array([[2, 2, 3]], np.int64))


def _expect_error(fn, status: str, *fragments: str) -> InferenceServerException:
    with pytest.raises(InferenceServerException) as info:
        fn()
    exc = info.value
    assert exc.status() == status, (exc.status(), exc.message())
    for fragment in fragments:
        assert fragment in exc.message(), exc.message()
    return exc


def test_missing_input_is_400(http_client):
    inp = httpclient.InferInput("INPUT0", [4], "FP32")
    inp.set_data_from_numpy(np.ones(4, np.float32))
    _expect_error(
        lambda: http_client.infer("add_sub", [inp]),
        "400",
        "expected 2 inputs but got 1 inputs for model 'add_sub'",
        "missing required input(s) ['INPUT1']",
    )


def test_wrong_datatype_is_400(http_client):
    a = httpclient.InferInput("INPUT0", [4], "INT32")
    a.set_data_from_numpy(np.ones(4, np.int32))
    b = httpclient.InferInput("INPUT1", [4], "FP32")
    b.set_data_from_numpy(np.ones(4, np.float32))
    _expect_error(
        lambda: http_client.infer("add_sub", [a, b]),
        "400",
        "inference input 'INPUT0' data-type is 'INT32', but model 'add_sub' expects 'FP32'",
    )


def test_wrong_shape_is_400(http_client):
    a = httpclient.InferInput("INPUT0", [3], "FP32")
    a.set_data_from_numpy(np.ones(3, np.float32))
    b = httpclient.InferInput("INPUT1", [4], "FP32")
    b.set_data_from_numpy(np.ones(4, np.float32))
    _expect_error(
        lambda: http_client.infer("add_sub", [a, b], request_id="r9"),
        "400",
        "[request id: r9] unexpected shape for input 'INPUT0' for model 'add_sub'. Expected [4], got [3].",
    )


def test_batch_above_max_batch_size_is_400(http_client):
    inp = httpclient.InferInput("INPUT0", [65, 1], "FP32")
    inp.set_data_from_numpy(np.ones((65, 1), np.float32))
    _expect_error(
        lambda: http_client.infer("identity", [inp]),
        "400",
        "inference request batch-size must be <= 64 for 'identity'",
    )


def test_unknown_output_is_400(http_client):
    a = np.ones(4, np.float32)
    _expect_error(
        lambda: _add_sub(http_client, a, a, outputs=["NOPE"]),
        "400",
        "unexpected inference output 'NOPE' for model 'add_sub'",
    )


def test_unknown_model_is_404(http_client):
    inp = httpclient.InferInput("INPUT0", [4], "FP32")
    inp.set_data_from_numpy(np.ones(4, np.float32))
    _expect_error(
        lambda: http_client.infer("no_such_model", [inp]),
        "404",
        "Request for unknown model: 'no_such_model' is not found",
    )


def test_duplicate_output_names_are_400(http_client):
    # Triton silently keeps the first of repeated output names; tritium names the mistake.
    a = np.ones(4, np.float32)
    _expect_error(
        lambda: _add_sub(http_client, a, a, outputs=["OUTPUT0", "OUTPUT0"]),
        "400",
        "output 'OUTPUT0' is requested more than once for model 'add_sub'",
    )
