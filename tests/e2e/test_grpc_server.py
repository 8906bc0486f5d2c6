"""gRPC error codes and texts, HTTP/gRPC parity, stream errors and response compression.

The server of this module compresses inference responses
(``--grpc-infer-response-compression-level=high``), so every answer here also proves
compressed responses decode. Error texts are Triton's; the same request gets the same
text over HTTP and gRPC (a service-level rule), with the status mapped per protocol.
"""

from __future__ import annotations

import queue
from collections.abc import Callable

import grpc
import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.grpc import service_pb2, service_pb2_grpc
from tritonclient.utils import InferenceServerException

#: gRPC status → HTTP status, as both frontends map core errors.
HTTP_STATUS = {
    "StatusCode.INVALID_ARGUMENT": "400",
    "StatusCode.NOT_FOUND": "404",
    "StatusCode.INTERNAL": "500",
    "StatusCode.UNAVAILABLE": "503",
}


@pytest.fixture(scope="module")
def grpc_server(grpc_launch):
    with grpc_launch(["--grpc-infer-response-compression-level=high"]) as server:
        assert "Started GRPCInferenceService at" in server.log
        yield server


@pytest.fixture(scope="module")
def clients(grpc_server):
    g = grpcclient.InferenceServerClient(grpc_server.grpc_url)
    h = httpclient.InferenceServerClient(grpc_server.http_url)
    yield g, h
    g.close()
    h.close()


@pytest.fixture(scope="module")
def stub(grpc_server):
    channel = grpc.insecure_channel(grpc_server.grpc_url)
    yield service_pb2_grpc.GRPCInferenceServiceStub(channel)
    channel.close()


def _inputs(module, spec: list[tuple[str, list[int], str, np.ndarray]]) -> list:
    inputs = []
    for name, shape, wire, data in spec:
        inp = module.InferInput(name, shape, wire)
        inp.set_data_from_numpy(data)
        inputs.append(inp)
    return inputs


def _error(call: Callable[[], object]) -> InferenceServerException:
    with pytest.raises(InferenceServerException) as info:
        call()
    return info.value


F4 = np.ones(4, np.float32)
I1 = np.array([1], np.int32)

# (id, model, inputs, infer kwargs, grpc status, Triton's text or a fragment of it)
ERROR_CASES = [
    ("missing-input", "add_sub", [("INPUT0", [4], "FP32", F4)], {}, "StatusCode.INVALID_ARGUMENT",
     "expected 2 inputs but got 1 inputs for model 'add_sub'. Got input(s) ['INPUT0'], "
     "but missing required input(s) ['INPUT1']. Please provide all required input(s)."),
    ("wrong-datatype", "add_sub", [("INPUT0", [4], "INT32", np.ones(4, np.int32)), ("INPUT1", [4], "FP32", F4)],
     {}, "StatusCode.INVALID_ARGUMENT",
     "inference input 'INPUT0' data-type is 'INT32', but model 'add_sub' expects 'FP32'"),
    ("wrong-shape", "add_sub", [("INPUT0", [3], "FP32", np.ones(3, np.float32)), ("INPUT1", [4], "FP32", F4)],
     {"request_id": "r9"}, "StatusCode.INVALID_ARGUMENT",
     "[request id: r9] unexpected shape for input 'INPUT0' for model 'add_sub'. Expected [4], got [3]."),
    ("batch-too-large", "identity", [("INPUT0", [65, 1], "FP32", np.ones((65, 1), np.float32))], {},
     "StatusCode.INVALID_ARGUMENT", "inference request batch-size must be <= 64 for 'identity'"),
    ("unknown-output", "add_sub", [("INPUT0", [4], "FP32", F4), ("INPUT1", [4], "FP32", F4)],
     {"outputs": ["NOPE"]}, "StatusCode.INVALID_ARGUMENT", "unexpected inference output 'NOPE' for model 'add_sub'"),
    ("unknown-model", "no_such_model", [("IN", [1], "INT32", I1)], {}, "StatusCode.NOT_FOUND",
     "Request for unknown model: 'no_such_model' is not found"),
    ("unknown-version", "versioned_all", [("IN", [1], "INT32", I1)], {"model_version": "9"},
     "StatusCode.NOT_FOUND", "Request for unknown model: 'versioned_all' version 9 is not found"),
    ("model-raises", "faulty", [("MODE", [1], "BYTES", np.array([b"raise"], np.object_))], {},
     "StatusCode.INTERNAL", "Failed to process the request(s) for model 'faulty_0', message: ValueError: model exploded"),
    ("model-error-response", "faulty", [("MODE", [1], "BYTES", np.array([b"error"], np.object_))], {},
     "StatusCode.INVALID_ARGUMENT", "bad input value"),
    ("model-crashes", "faulty", [("MODE", [1], "BYTES", np.array([b"crash"], np.object_))], {},
     "StatusCode.UNAVAILABLE", "exited unexpectedly"),
]


def _call(client, module, model, spec, kwargs):
    kwargs = dict(kwargs)
    if "outputs" in kwargs:
        kwargs["outputs"] = [module.InferRequestedOutput(n) for n in kwargs["outputs"]]
    return lambda: client.infer(model, _inputs(module, spec), **kwargs)


@pytest.mark.parametrize(
    ("model", "spec", "kwargs", "status", "text"), [c[1:] for c in ERROR_CASES], ids=[c[0] for c in ERROR_CASES]
)
def test_errors_match_over_http_and_grpc(clients, model, spec, kwargs, status, text):
    g, h = clients
    over_grpc = _error(_call(g, grpcclient, model, spec, kwargs))
    over_http = _error(_call(h, httpclient, model, spec, kwargs))
    assert over_grpc.status() == status, over_grpc.message()
    assert text in over_grpc.message()
    assert over_http.status() == HTTP_STATUS[status]
    assert over_http.message() == over_grpc.message()
    # Nothing internal leaks to the client.
    assert "Traceback" not in over_grpc.message() and "/tests/models/" not in over_grpc.message()


def test_server_serves_after_errors(clients):
    g, _ = clients
    ok = g.infer("faulty", _inputs(grpcclient, [("MODE", [1], "BYTES", np.array([b"ok"], np.object_))]))
    assert ok.as_numpy("OUT").shape == (1,)


def test_unknown_model_metadata_config_statistics(clients):
    g, h = clients
    for call, http_call in [
        (lambda: g.get_model_metadata("no_such_model"), lambda: h.get_model_metadata("no_such_model")),
        (lambda: g.get_model_config("no_such_model"), lambda: h.get_model_config("no_such_model")),
    ]:
        err, http_err = _error(call), _error(http_call)
        assert err.status() == "StatusCode.NOT_FOUND" and http_err.status() == "404"
        assert err.message() == http_err.message() == "Request for unknown model: 'no_such_model' is not found"
    # Triton: statistics of an unknown model are INVALID_ARGUMENT (400), not NOT_FOUND.
    err, http_err = _error(lambda: g.get_inference_statistics("nope")), _error(lambda: h.get_inference_statistics("nope"))
    assert err.status() == "StatusCode.INVALID_ARGUMENT" and http_err.status() == "400"
    assert err.message() == http_err.message() == "requested model 'nope' is not available"


# ------------------------------------------------------------ typed / raw request errors


def _add_sub_typed(request_id: str = "") -> service_pb2.ModelInferRequest:
    request = service_pb2.ModelInferRequest(model_name="add_sub", id=request_id)
    for name in ("INPUT0", "INPUT1"):
        request.inputs.add(name=name, datatype="FP32", shape=[4]).contents.fp32_contents.extend([1, 2, 3, 4])
    return request


def _bad_requests() -> dict[str, service_pb2.ModelInferRequest]:
    no_data = _add_sub_typed()
    no_data.inputs[1].ClearField("contents")
    count = _add_sub_typed("x")
    del count.inputs[1].contents.fp32_contents[3]
    both = _add_sub_typed()
    both.raw_input_contents.extend([np.ones(4, np.float32).tobytes()] * 2)
    wrong_field = _add_sub_typed()
    for tensor in wrong_field.inputs:
        tensor.contents.ClearField("fp32_contents")
        tensor.contents.int_contents.extend([1, 2, 3, 4])
    reserved = _add_sub_typed()
    reserved.parameters["triton_x"].bool_param = True
    raw_size = service_pb2.ModelInferRequest(model_name="identity")
    raw_size.inputs.add(name="INPUT0", datatype="FP32", shape=[1, 1000000000])
    raw_size.raw_input_contents.append(b"\0" * 8)
    bad_bytes = service_pb2.ModelInferRequest(model_name="string_upper")
    bad_bytes.inputs.add(name="TEXT", datatype="BYTES", shape=[2])
    bad_bytes.raw_input_contents.append(b"\x05\x00\x00\x00ab")
    return {"no-data": no_data, "count": count, "both": both, "wrong-field": wrong_field,
            "reserved": reserved, "raw-size": raw_size, "bad-bytes": bad_bytes}


# What tritium says; each names the input and the model.
TRITIUM_TEXTS = {
    "no-data": "'INPUT1' for model 'add_sub'",
    "count": "'INPUT1' for model 'add_sub'",
    "both": "contents field must not be specified when using raw_input_contents",
    "wrong-field": "'INPUT0' for model 'add_sub'",
    "reserved": "parameter keys starting with 'triton_' are reserved for Triton usage",
    "raw-size": "input byte size mismatch for input 'INPUT0' for model 'identity'. Expected 4000000000, got 8",
    "bad-bytes": "inference input 'TEXT'",
}

# Triton 2.51's exact texts where tritium's differ (infer_codec.py); strict, so a fix shows.
TRITON_TEXTS = {
    "no-data": "unable to find data for input tensor 'INPUT1' for model 'add_sub' in request.",
    "count": "[request id: x] input byte size mismatch for input 'INPUT1' for model 'add_sub'. Expected 16, got 12",
    "both": "contents field must not be specified when using raw_input_contents for 'INPUT0' for model 'add_sub'",
    "wrong-field": "unexpected explicit tensor data for input tensor 'INPUT0' for model 'add_sub' of type 'INT32', "
    "expected datatype 'FP32'",
    "reserved": "parameter keys starting with 'triton_' are reserved for Triton usage. Only the following keys "
    "starting with 'triton_' are allowed: triton_enable_empty_final_response",
    "raw-size": "[request id: <id_unknown>] input byte size mismatch for input 'INPUT0' for model 'identity'. "
    "Expected 4000000000, got 8",
}


@pytest.mark.parametrize("case", sorted(TRITIUM_TEXTS))
def test_bad_tensor_data_is_invalid_argument(stub, case):
    with pytest.raises(grpc.RpcError) as info:
        stub.ModelInfer(_bad_requests()[case])
    assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert TRITIUM_TEXTS[case] in info.value.details()


@pytest.mark.parametrize("case", sorted(TRITON_TEXTS))
def test_bad_tensor_data_texts_are_tritons(stub, case):
    with pytest.raises(grpc.RpcError) as info:
        stub.ModelInfer(_bad_requests()[case])
    assert info.value.details() == TRITON_TEXTS[case]


# --------------------------------------------------------------------------- streams


def test_stream_error_names_the_request_and_the_stream_goes_on(stub):
    def requests():
        bad = service_pb2.ModelInferRequest(model_name="add_sub", id="bad")
        bad.inputs.add(name="INPUT0", datatype="FP32", shape=[3]).contents.fp32_contents.extend([1, 2, 3])
        yield bad
        yield service_pb2.ModelInferRequest(model_name="nope", id="unknown")
        yield _add_sub_typed("good")

    replies = {r.infer_response.id: r for r in stub.ModelStreamInfer(requests(), timeout=60)}
    assert sorted(replies) == ["bad", "good", "unknown"]
    assert "missing required input(s) ['INPUT1']" in replies["bad"].error_message
    assert replies["unknown"].error_message == "Request for unknown model: 'nope' is not found"
    good = replies["good"]
    assert good.error_message == ""
    assert good.infer_response.model_name == "add_sub"
    assert np.frombuffer(good.infer_response.raw_output_contents[0], np.float32).tolist() == [2, 4, 6, 8]


def test_stream_with_tritonclient_after_a_model_error(grpc_server):
    results: queue.Queue = queue.Queue()
    c = grpcclient.InferenceServerClient(grpc_server.grpc_url)
    try:
        c.start_stream(callback=lambda result, error: results.put((result, error)))
        c.async_stream_infer("faulty", _inputs(grpcclient, [("MODE", [1], "BYTES", np.array([b"raise"], np.object_))]))
        got_error = results.get(timeout=60)
        c.async_stream_infer("add_sub", _inputs(grpcclient, [("INPUT0", [4], "FP32", F4), ("INPUT1", [4], "FP32", F4)]),
                             request_id="after")
        got_ok = results.get(timeout=60)
    finally:
        c.stop_stream()
        c.close()
    assert got_error[0] is None and "model exploded" in got_error[1].message()
    assert got_ok[1] is None and got_ok[0].get_response().id == "after"
    np.testing.assert_array_equal(got_ok[0].as_numpy("OUTPUT0"), F4 + F4)


# ------------------------------------------------------------- compressed responses


def test_compressed_responses_decode(clients):
    g, _ = clients
    data = np.arange(64 * 1024, dtype=np.float32).reshape(1, -1)
    inp = grpcclient.InferInput("INPUT0", list(data.shape), "FP32")
    inp.set_data_from_numpy(data)
    np.testing.assert_array_equal(g.infer("identity", [inp]).as_numpy("OUTPUT0"), data)
    text = grpcclient.InferInput("TEXT", [2], "BYTES")
    text.set_data_from_numpy(np.array([b"abc", b"x" * 1000], np.object_))
    assert g.infer("string_upper", [text]).as_numpy("UPPER").tolist() == [b"ABC", b"X" * 1000]
    assert g.is_server_ready() and g.get_model_metadata("identity").name == "identity"


def test_http_and_grpc_answer_the_same_server(clients):
    g, h = clients
    assert h.get_model_config("identity")["max_batch_size"] == 64
    assert g.get_model_config("identity", as_json=True)["config"]["max_batch_size"] == 64


def _h2_call(port: int, method: str, message: bytes) -> tuple[dict[str, str], bytes]:
    """One unary gRPC call over a bare HTTP/2 connection: (response headers, body bytes)."""
    import socket

    import h2.connection
    import h2.events

    conn = h2.connection.H2Connection()
    headers: dict[str, str] = {}
    body = bytearray()
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        conn.initiate_connection()
        conn.send_headers(1, [
            (":method", "POST"), (":scheme", "http"), (":authority", f"127.0.0.1:{port}"),
            (":path", f"/inference.GRPCInferenceService/{method}"), ("content-type", "application/grpc"),
            ("te", "trailers"), ("grpc-accept-encoding", "identity,deflate,gzip"),
        ])
        conn.send_data(1, b"\0" + len(message).to_bytes(4, "big") + message, end_stream=True)
        sock.sendall(conn.data_to_send())
        ended = False
        while not ended:
            chunk = sock.recv(65536)
            assert chunk, "connection closed before the call ended"
            for event in conn.receive_data(chunk):
                if isinstance(event, (h2.events.ResponseReceived, h2.events.TrailersReceived)):
                    headers.update((k.decode(), v.decode()) for k, v in event.headers)
                elif isinstance(event, h2.events.DataReceived):
                    body += event.data
                    conn.acknowledge_received_data(event.flow_controlled_length, event.stream_id)
                elif isinstance(event, h2.events.StreamEnded):
                    ended = True
            sock.sendall(conn.data_to_send())
    return headers, bytes(body)


def test_only_inference_responses_are_compressed(grpc_server):
    # Triton sets the level on ModelInfer/ModelStreamInfer calls only; "high" with a client
    # that accepts deflate and gzip means deflate (grpc core's choice for the level).
    import zlib

    request = _add_sub_typed("z")
    headers, body = _h2_call(grpc_server.grpc_port, "ModelInfer", request.SerializeToString())
    assert headers.get("grpc-status") == "0", headers
    assert headers.get("grpc-encoding") == "deflate"
    assert body[0] == 1  # the compressed flag of the length-prefixed message
    reply = service_pb2.ModelInferResponse.FromString(zlib.decompress(body[5:]))
    assert reply.id == "z"
    assert np.frombuffer(reply.raw_output_contents[0], np.float32).tolist() == [2, 4, 6, 8]
    headers, body = _h2_call(grpc_server.grpc_port, "ServerLive", b"")
    assert headers.get("grpc-status") == "0" and headers.get("grpc-encoding", "identity") == "identity"
    assert body[0] == 0 and service_pb2.ServerLiveResponse.FromString(body[5:]).live
