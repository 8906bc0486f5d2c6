"""Requests Triton 2.51 refuses, over gRPC and HTTP: tritium answers the same code and text.

Covered here: a version string that is not a version (gRPC and HTTP), an input sent both as
typed ``contents`` and in ``raw_input_contents``, and malformed ``classification``
parameters. Each request is sent unchanged to real Triton and to tritium.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

if not (Path(os.environ.get("ANCHORS", "/tmp/anchors")) / "bin" / "tritonserver").exists():
    pytest.skip("real Triton is not installed (setup-anchors.sh)", allow_module_level=True)

import grpc  # noqa: E402
import tritonclient.grpc as grpcclient  # noqa: E402
from tritonclient.grpc import service_pb2, service_pb2_grpc  # noqa: E402
from tritonclient.utils import InferenceServerException  # noqa: E402

pytestmark = pytest.mark.anchors

VEC = np.array([1.0, 2.0, 3.0, 4.0], dtype=np.float32)
STOL = (
    "failed to get model version from specified version string '{}' (details: stol), "
    "version should be an integral value > 0"
)


def _both_grpc(pair, call) -> tuple[tuple, tuple]:
    """(code, text) or ("OK", value) from ``call(stub)`` on each server."""
    got = []
    for endpoint in (pair.triton, pair.tritium):
        with grpc.insecure_channel(endpoint.grpc_url) as channel:
            stub = service_pb2_grpc.GRPCInferenceServiceStub(channel)
            try:
                got.append(("OK", call(stub)))
            except grpc.RpcError as exc:
                got.append((exc.code(), exc.details()))
    print(f"  triton : {got[0]}\n  tritium: {got[1]}")
    return got[0], got[1]


def _add_sub(version: str = "") -> service_pb2.ModelInferRequest:
    request = service_pb2.ModelInferRequest(model_name="add_sub", model_version=version)
    for name in ("INPUT0", "INPUT1"):
        request.inputs.add(name=name, datatype="FP32", shape=[4])
    return request


def _raw_add_sub(version: str = "") -> service_pb2.ModelInferRequest:
    request = _add_sub(version)
    request.raw_input_contents.extend([VEC.tobytes(), VEC.tobytes()])
    return request


# ------------------------------------------------------------------ versions


@pytest.mark.parametrize(
    "version",
    ["wrong_specification", "-1", "99999999999999999999", "0", "7", "007", "1x", " 1", "+1"],
)
def test_grpc_infer_version_strings(pair, version):
    theirs, ours = _both_grpc(
        pair, lambda stub: len(stub.ModelInfer(_raw_add_sub(version)).raw_output_contents)
    )
    assert ours == theirs


def test_grpc_wrong_version_string_is_invalid_argument(pair):
    # The case Triton's own example client (grpc_client.py) checks.
    theirs, ours = _both_grpc(
        pair, lambda stub: stub.ModelInfer(_raw_add_sub("wrong_specification"))
    )
    assert ours == theirs == (
        grpc.StatusCode.INVALID_ARGUMENT,
        STOL.format("wrong_specification"),
    )


@pytest.mark.parametrize("version", ["wrong_specification", "-1", "0"])
@pytest.mark.parametrize("method", ["ModelReady", "ModelMetadata", "ModelConfig"])
def test_grpc_model_calls_version_strings(pair, method, version):
    request = {
        "ModelReady": service_pb2.ModelReadyRequest,
        "ModelMetadata": service_pb2.ModelMetadataRequest,
        "ModelConfig": service_pb2.ModelConfigRequest,
    }[method](name="add_sub", version=version)
    theirs, ours = _both_grpc(pair, lambda stub: str(getattr(stub, method)(request))[:0])
    assert ours == theirs


def test_grpc_wrong_version_with_tritonclient(pair):
    got = []
    for endpoint in (pair.triton, pair.tritium):
        client = grpcclient.InferenceServerClient(endpoint.grpc_url)
        inputs = []
        for name in ("INPUT0", "INPUT1"):
            inp = grpcclient.InferInput(name, [4], "FP32")
            inp.set_data_from_numpy(VEC)
            inputs.append(inp)
        try:
            with pytest.raises(InferenceServerException) as info:
                client.infer("add_sub", inputs, model_version="wrong_specification")
        finally:
            client.close()
        got.append((info.value.status(), info.value.message()))
    assert got[1] == got[0]
    assert got[1] == ("StatusCode.INVALID_ARGUMENT", STOL.format("wrong_specification"))


@pytest.mark.parametrize(
    "path",
    [
        "/v2/models/add_sub/versions/wrong_specification",
        "/v2/models/add_sub/versions/99999999999999999999",
        "/v2/models/add_sub/versions/99999999999999999999/ready",
        "/v2/models/add_sub/versions/99999999999999999999/config",
        "/v2/models/add_sub/versions/99999999999999999999/stats",
        "/v2/models/add_sub/versions/007",
        "/v2/models/add_sub/versions/0/ready",
    ],
)
def test_http_version_strings(pair, path):
    theirs, ours = pair.both("GET", path)
    assert (ours.status, ours.body) == (theirs.status, theirs.body)
    if path.endswith("/ready"):
        # Deliberately different: the body is JSON and tritium says so, where Triton 2.51
        # says text/plain (see test_routes.test_model_ready_content_type).
        assert (theirs.content_type, ours.content_type) == ("text/plain", "application/json")
    else:
        assert ours.content_type == theirs.content_type


@pytest.mark.parametrize("version", ["wrong_specification", "99999999999999999999", "7"])
def test_http_infer_version_strings(pair, version):
    theirs, ours = pair.infer(
        f"add_sub/versions/{version}", [("INPUT0", "FP32", VEC), ("INPUT1", "FP32", VEC)]
    )
    assert (ours.status, ours.body) == (theirs.status, theirs.body)


# ----------------------------------------------------- contents and raw contents


def _contents_and_raw(typed: str, raws: int) -> service_pb2.ModelInferRequest:
    request = _add_sub()
    for tensor in request.inputs:
        if tensor.name == typed:
            tensor.contents.fp32_contents.extend(VEC.tolist())
    request.raw_input_contents.extend([VEC.tobytes()] * raws)
    return request


@pytest.mark.parametrize("typed", ["INPUT0", "INPUT1"])
@pytest.mark.parametrize("raws", [1, 2])
def test_grpc_contents_with_raw_contents(pair, typed, raws):
    theirs, ours = _both_grpc(pair, lambda stub: stub.ModelInfer(_contents_and_raw(typed, raws)))
    assert ours == theirs == (
        grpc.StatusCode.INVALID_ARGUMENT,
        f"contents field must not be specified when using raw_input_contents for '{typed}' "
        "for model 'add_sub'",
    )


def test_grpc_too_few_raw_contents(pair):
    request = _add_sub()
    request.raw_input_contents.append(VEC.tobytes())
    theirs, ours = _both_grpc(pair, lambda stub: stub.ModelInfer(request))
    assert ours == theirs == (
        grpc.StatusCode.INVALID_ARGUMENT,
        "unable to find data for input tensor 'INPUT1' for model 'add_sub' in request.",
    )


def test_grpc_too_many_raw_contents(pair):
    # Triton ignores the extra content; tritium refuses the request and says why.
    request = _raw_add_sub()
    request.raw_input_contents.append(VEC.tobytes())
    theirs, ours = _both_grpc(pair, lambda stub: len(stub.ModelInfer(request).outputs))
    assert theirs == ("OK", 2)
    assert ours == (
        grpc.StatusCode.INVALID_ARGUMENT,
        "expected 2 raw input contents (one per input not in shared memory) for model "
        "'add_sub', got 3",
    )


# ---------------------------------------------------- classification parameters


@pytest.mark.parametrize(
    "field,value",
    [
        ("string_param", "2"),
        ("uint64_param", 2),
        ("bool_param", True),
        ("int64_param", 0),
        ("int64_param", -2),
    ],
)
def test_grpc_classification_parameter(pair, field, value):
    request = _raw_add_sub()
    out = request.outputs.add(name="OUTPUT0")
    setattr(out.parameters["classification"], field, value)
    theirs, ours = _both_grpc(pair, lambda stub: stub.ModelInfer(request))
    assert ours == theirs
    assert ours[0] == grpc.StatusCode.INVALID_ARGUMENT


def test_grpc_classification_with_shared_memory(pair):
    request = _raw_add_sub()
    out = request.outputs.add(name="OUTPUT0")
    out.parameters["classification"].int64_param = 2
    out.parameters["shared_memory_region"].string_param = "nowhere"
    out.parameters["shared_memory_byte_size"].int64_param = 64
    theirs, ours = _both_grpc(pair, lambda stub: stub.ModelInfer(request))
    assert ours == theirs == (
        grpc.StatusCode.INVALID_ARGUMENT,
        "output can't set both 'shared_memory_region' and 'classification'",
    )
