"""Details Triton's own example clients rely on, over HTTP and both gRPC transports with the
real ``tritonclient``: output ``reshape``, classification with ``label_filename`` labels
(unary and streaming gRPC too), Triton's gRPC error codes and texts for bad version strings
and for inputs sent twice, and the reason ``/v2/health/ready`` and the start-up log give
when one model keeps the server not ready.

The server runs on a copy of tests/compat/models (where tests/compat compares the same
answers with real Triton's); ``init_fails`` in it keeps the server not ready.
"""

from __future__ import annotations

import http.client
import json
import queue
import shutil
from collections.abc import Iterator
from pathlib import Path

import grpc
import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.grpc import service_pb2, service_pb2_grpc
from tritonclient.utils import InferenceServerException

from tritium.testing import ServerProcess

COMPAT_MODELS = Path(__file__).resolve().parents[1] / "compat" / "models"
PROTOCOLS = {"http": httpclient, "grpc": grpcclient}
COLUMN = np.array([[1.5], [-2.0], [0.25]], dtype=np.float32)
SCORES = np.array([[0.1, 0.7, 0.2, 0.9], [0.3, 0.3, 0.1, 0.0]], dtype=np.float32)
VEC = np.array([1.0, 2.0, 3.0, 4.0], dtype=np.float32)
STOL = (
    "failed to get model version from specified version string '{}' (details: stol), "
    "version should be an integral value > 0"
)


@pytest.fixture(scope="module")
def models(grpc_impl: str, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the compat models per server, so a test may change a label file under it."""
    root = tmp_path_factory.mktemp(f"repo-{grpc_impl}") / "models"
    shutil.copytree(COMPAT_MODELS, root, ignore=shutil.ignore_patterns("__pycache__"))
    return root


@pytest.fixture(scope="module")
def server(grpc_impl: str, models: Path) -> Iterator[ServerProcess]:
    args = ["--exit-on-error=false", f"--grpc-implementation={grpc_impl}"]
    with ServerProcess([models], args, grpc=True) as proc:
        assert proc.grpc_port is not None, proc.log[-3000:]
        yield proc


def _client(server: ServerProcess, protocol: str):
    module = PROTOCOLS[protocol]
    url = server.http_url if protocol == "http" else server.grpc_url
    return module.InferenceServerClient(url)


def _infer(server, protocol: str, model: str, value: np.ndarray, outputs, **kw):
    module = PROTOCOLS[protocol]
    client = _client(server, protocol)
    try:
        inp = module.InferInput("IN", list(value.shape), "FP32")
        inp.set_data_from_numpy(value)
        requested = [module.InferRequestedOutput(name, class_count=k, **kw) for name, k in outputs]
        return client.infer(model, [inp], outputs=requested)
    finally:
        client.close()


# ------------------------------------------------------------------- reshape


@pytest.mark.parametrize("protocol", sorted(PROTOCOLS))
def test_outputs_come_back_with_the_config_dims(server, protocol):
    names = ["OUT", "GRID", "VAR", "PLAIN"]
    result = _infer(server, protocol, "reshape_out", COLUMN, [(n, 0) for n in names])
    x = COLUMN.reshape(3)
    expected = {
        "OUT": (x * 2).reshape(3, 1),  # dims [1] reshape []: the model returned [3]
        "GRID": (np.arange(4) + x[:, None]).reshape(3, 2, 2),  # dims [2,2] reshape [4]
        "VAR": np.ones((3, 3, 1)) * x[:, None, None],  # dims [-1,1] reshape [-1]
        "PLAIN": COLUMN,
    }
    for name in names:
        got = result.as_numpy(name)
        assert got.shape == expected[name].shape, name
        np.testing.assert_array_equal(got, expected[name])
    shapes = {o["name"]: [int(d) for d in o["shape"]] for o in _outputs_json(result, protocol)}
    assert shapes == {"OUT": [3, 1], "GRID": [3, 2, 2], "VAR": [3, 3, 1], "PLAIN": [3, 1]}


def _strings(array: np.ndarray) -> list:
    """BYTES elements as bytes (tritonclient.http gives str for JSON data)."""
    flat = [s if isinstance(s, bytes) else s.encode() for s in array.reshape(-1)]
    return np.array(flat, dtype=np.object_).reshape(array.shape).tolist()


def _outputs_json(result, protocol: str) -> list[dict]:
    if protocol == "http":
        return result.get_response()["outputs"]
    return result.get_response(as_json=True)["outputs"]


@pytest.mark.parametrize("protocol", sorted(PROTOCOLS))
def test_reshape_without_batching(server, protocol):
    grid = np.arange(6, dtype=np.float32).reshape(2, 3)
    result = _infer(server, protocol, "flat_outputs", grid, [("ROWS", 0)])
    np.testing.assert_array_equal(result.as_numpy("ROWS"), grid.reshape(3, 2))


# ------------------------------------------------------------ classification


LABELLED = [
    [b"0.900000:3:bird", b"0.700000:1:dog", b"0.200000:2"],
    [b"0.300000:0:cat", b"0.300000:1:dog", b"0.100000:2"],
]


@pytest.mark.parametrize("binary", [True, False])
@pytest.mark.parametrize("protocol", sorted(PROTOCOLS))
def test_classification_with_labels(server, protocol, binary):
    kw = {"binary_data": binary} if protocol == "http" else {}
    result = _infer(server, protocol, "classify", SCORES, [("SCORES", 3), ("COUNTS", 2)], **kw)
    assert _strings(result.as_numpy("SCORES")) == LABELLED
    assert _strings(result.as_numpy("COUNTS")) == [[b"9:3", b"7:1"], [b"3:0", b"3:1"]]
    types = {o["name"]: o["datatype"] for o in _outputs_json(result, protocol)}
    assert types == {"SCORES": "BYTES", "COUNTS": "BYTES"}


@pytest.mark.parametrize("protocol", sorted(PROTOCOLS))
def test_classification_without_batching(server, protocol):
    grid = np.array([[0.5, 0.1, 0.9], [0.3, 0.8, 0.2]], dtype=np.float32)
    result = _infer(server, protocol, "flat_outputs", grid, [("OUT", 2)])
    assert result.as_numpy("OUT").tolist() == [b"0.900000:2:c", b"0.800000:4:e"]


@pytest.mark.parametrize("protocol", sorted(PROTOCOLS))
def test_classification_of_an_unsupported_type(server, protocol):
    with pytest.raises(InferenceServerException) as info:
        _infer(server, protocol, "classify", SCORES, [("FLAGS", 1)])
    assert info.value.message() == (
        "class result not available for output due to unsupported type 'BOOL'"
    )
    assert info.value.status() in ("400", "StatusCode.INVALID_ARGUMENT")


def test_classification_over_a_grpc_stream(server):
    replies: queue.Queue = queue.Queue()
    client = grpcclient.InferenceServerClient(server.grpc_url)
    client.start_stream(callback=lambda result, error: replies.put((result, error)))
    try:
        for i, row in enumerate(SCORES):
            inp = grpcclient.InferInput("IN", [1, 4], "FP32")
            inp.set_data_from_numpy(row.reshape(1, 4))
            client.async_stream_infer(
                "classify",
                [inp],
                outputs=[grpcclient.InferRequestedOutput("SCORES", class_count=3)],
                request_id=str(i),
            )
        got = {}
        for _ in SCORES:
            result, error = replies.get(timeout=60)
            assert error is None, error
            got[result.get_response().id] = result.as_numpy("SCORES").tolist()
    finally:
        client.stop_stream()
        client.close()
    assert got == {"0": [LABELLED[0]], "1": [LABELLED[1]]}


def test_labels_are_read_when_the_model_loads(server, models):
    # Changing the file under a loaded model changes nothing: Triton reads labels at load.
    (models / "classify" / "labels.txt").write_text("x\ny\nz\nw\n")
    result = _infer(server, "grpc", "classify", SCORES, [("SCORES", 3)])
    assert result.as_numpy("SCORES").tolist() == LABELLED


def test_repeated_classification_requests_over_grpc(server):
    # The second request takes the decoder's cached path for a repeated header, if any.
    for _ in range(3):
        result = _infer(server, "grpc", "classify", SCORES, [("SCORES", 1)])
        assert result.as_numpy("SCORES").tolist() == [[LABELLED[0][0]], [LABELLED[1][0]]]
    plain = _infer(server, "grpc", "classify", SCORES, [("SCORES", 0)])
    np.testing.assert_array_equal(plain.as_numpy("SCORES"), SCORES)


# ------------------------------------------------------------- request errors


def _stub_call(server: ServerProcess, call):
    with grpc.insecure_channel(server.grpc_url) as channel:
        try:
            return ("OK", call(service_pb2_grpc.GRPCInferenceServiceStub(channel)))
        except grpc.RpcError as exc:
            return (exc.code(), exc.details())


def _add_sub(version: str = "", raws: int = 2, typed: str = "") -> service_pb2.ModelInferRequest:
    request = service_pb2.ModelInferRequest(model_name="add_sub", model_version=version)
    for name in ("INPUT0", "INPUT1"):
        tensor = request.inputs.add(name=name, datatype="FP32", shape=[4])
        if name == typed:
            tensor.contents.fp32_contents.extend(VEC.tolist())
    request.raw_input_contents.extend([VEC.tobytes()] * raws)
    return request


def test_grpc_wrong_version_string(server):
    client = grpcclient.InferenceServerClient(server.grpc_url)
    inputs = []
    for name in ("INPUT0", "INPUT1"):
        inputs.append(grpcclient.InferInput(name, [4], "FP32"))
        inputs[-1].set_data_from_numpy(VEC)
    try:
        with pytest.raises(InferenceServerException) as info:
            client.infer("add_sub", inputs, model_version="wrong_specification")
        assert info.value.status() == "StatusCode.INVALID_ARGUMENT"
        assert info.value.message() == STOL.format("wrong_specification")
        with pytest.raises(InferenceServerException) as info:
            client.is_model_ready("add_sub", "-1")
        assert info.value.status() == "StatusCode.INVALID_ARGUMENT"
        assert info.value.message() == (
            "invalid model version specified '-1' , version should be an integral value > 0"
        )
        # std::stol reads the leading digits, as Triton does.
        result = client.infer("add_sub", inputs, model_version="1x")
        np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), VEC + VEC)
    finally:
        client.close()
    assert _stub_call(server, lambda stub: stub.ModelInfer(_add_sub("0"))) == (
        grpc.StatusCode.NOT_FOUND,
        "Request for unknown model: 'add_sub' version 0 is not found",
    )


def test_http_version_too_large_for_a_version(server):
    client = httpclient.InferenceServerClient(server.http_url)
    try:
        with pytest.raises(InferenceServerException) as info:
            client.get_model_metadata("add_sub", "99999999999999999999")
        assert info.value.status() == "400"
        assert info.value.message() == STOL.format("99999999999999999999")
        with pytest.raises(InferenceServerException) as info:
            client.get_model_metadata("add_sub", "007")
        assert info.value.message() == "Request for unknown model: 'add_sub' version 7 is not found"
    finally:
        client.close()


@pytest.mark.parametrize("typed", ["INPUT0", "INPUT1"])
@pytest.mark.parametrize("raws", [1, 2])
def test_grpc_contents_and_raw_contents(server, typed, raws):
    assert _stub_call(server, lambda stub: stub.ModelInfer(_add_sub(raws=raws, typed=typed))) == (
        grpc.StatusCode.INVALID_ARGUMENT,
        f"contents field must not be specified when using raw_input_contents for '{typed}' "
        "for model 'add_sub'",
    )


def test_grpc_classification_parameter_type(server):
    request = _add_sub()
    request.outputs.add(name="OUTPUT0").parameters["classification"].string_param = "2"
    assert _stub_call(server, lambda stub: stub.ModelInfer(request)) == (
        grpc.StatusCode.INVALID_ARGUMENT,
        "invalid value type for 'classification' parameter, expected int64_param",
    )


# ----------------------------------------------------------------- readiness


def test_ready_says_which_model_and_why(server):
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
    try:
        conn.request("GET", "/v2/health/ready")
        reply = conn.getresponse()
        status, body = reply.status, reply.read()
    finally:
        conn.close()
    assert status == 400  # Triton's status; its body is empty
    message = json.loads(body)["error"]
    assert message.startswith(
        "the server is not ready because not every model is ready (--strict-readiness=true): "
        "model 'init_fails' version 1 is UNAVAILABLE: "
    )
    assert "weights are missing" in message
    client = grpcclient.InferenceServerClient(server.grpc_url)
    try:
        assert client.is_server_ready() is False
    finally:
        client.close()


def test_start_up_log_names_the_model_that_keeps_the_server_not_ready(server):
    assert server.wait_for_log(
        r"the server will not be ready \(--strict-readiness=true\) until every model is: "
        r"model 'init_fails' version 1 is UNAVAILABLE: .*weights are missing"
    ), server.log[-3000:]


def test_ready_without_strict_readiness(grpc_impl):
    if grpc_impl != "native":
        pytest.skip("HTTP only: once is enough")
    args = ["--exit-on-error=false", "--strict-readiness=false"]
    with ServerProcess([COMPAT_MODELS], args) as proc:
        client = httpclient.InferenceServerClient(proc.http_url)
        try:
            assert client.is_server_ready()
        finally:
            client.close()
        assert "will not be ready" not in proc.log
