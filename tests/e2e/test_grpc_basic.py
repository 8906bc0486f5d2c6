"""The gRPC endpoint (grpc.aio transport) with the real tritonclient.grpc client.

The server runs in this process, on an event loop in a background thread, over the
example repository (``tritium serve`` does not start gRPC yet). The codec tests at the
end need no socket.
"""

from __future__ import annotations

import asyncio
import queue
import threading
from pathlib import Path

import grpc
import numpy as np
import pytest
import tritonclient.grpc as grpcclient
from tritonclient.grpc import service_pb2, service_pb2_grpc
from tritonclient.utils import InferenceServerException

from tritium.core.errors import InvalidArgument, Unsupported
from tritium.core.types import InferResponse, OutputTensor
from tritium.frontends.grpc import (
    GrpcOptions,
    decode_infer_request,
    encode_infer_response,
    model_config_response,
    start_grpc_server,
)
from tritium.service import LoadOptions, ModelManager, Service

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "model_repository"


class _LoopThread:
    """An event loop running in a daemon thread; ``call`` runs a coroutine on it."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()

    def call(self, coro, timeout: float = 120.0):
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()


@pytest.fixture(scope="module")
def grpc_url():
    runner = _LoopThread()
    models = ModelManager([EXAMPLES], LoadOptions())
    server = None

    async def start():
        await models.load_all()
        service = Service(models)
        service.started = True
        return await start_grpc_server(service, GrpcOptions(host="127.0.0.1", port=0))

    try:
        server = runner.call(start())
        yield f"127.0.0.1:{server.port}"
    finally:
        if server is not None:
            runner.call(server.stop(1.0))
        runner.call(models.unload_all())
        runner.close()


@pytest.fixture(scope="module")
def client(grpc_url):
    c = grpcclient.InferenceServerClient(grpc_url)
    yield c
    c.close()


@pytest.fixture(scope="module")
def stub(grpc_url):
    channel = grpc.insecure_channel(grpc_url)
    yield service_pb2_grpc.GRPCInferenceServiceStub(channel)
    channel.close()


# ------------------------------------------------------------------ health, metadata


def test_health(client):
    assert client.is_server_live()
    assert client.is_server_ready()
    assert client.is_model_ready("add_sub")
    assert client.is_model_ready("add_sub", "1")
    assert not client.is_model_ready("no_such_model")


def test_server_metadata(client):
    meta = client.get_server_metadata(as_json=True)
    assert meta["name"] == "triton"
    assert "statistics" in meta["extensions"]


def test_model_metadata(client):
    meta = client.get_model_metadata("add_sub", as_json=True)
    assert meta["name"] == "add_sub"
    assert meta["versions"] == ["1"]
    assert meta["platform"] == "python"
    assert meta["inputs"] == [
        {"name": "INPUT0", "datatype": "FP32", "shape": ["4"]},
        {"name": "INPUT1", "datatype": "FP32", "shape": ["4"]},
    ]
    assert [o["name"] for o in meta["outputs"]] == ["OUTPUT0", "OUTPUT1"]


def test_model_config(client):
    config = client.get_model_config("identity", as_json=True)["config"]
    assert config["name"] == "identity"
    assert config["max_batch_size"] == 64
    assert config["input"][0]["data_type"] == "TYPE_FP32"
    assert "dynamic_batching" in config


def test_unknown_model_metadata_is_an_error(client):
    with pytest.raises(InferenceServerException) as err:
        client.get_model_metadata("no_such_model")
    assert err.value.status() == "StatusCode.NOT_FOUND"
    assert "no_such_model" in err.value.message()


# ------------------------------------------------------------------------- infer


def _add_sub_inputs(a, b):
    inputs = [grpcclient.InferInput("INPUT0", [4], "FP32"), grpcclient.InferInput("INPUT1", [4], "FP32")]
    inputs[0].set_data_from_numpy(a)
    inputs[1].set_data_from_numpy(b)
    return inputs


@pytest.mark.parametrize("outputs", [None, ["OUTPUT0", "OUTPUT1"], ["OUTPUT1"]])
def test_add_sub(client, outputs):
    a = np.array([1, 2, 3, 4], np.float32)
    b = np.array([10, 20, 30, 40], np.float32)
    requested = None if outputs is None else [grpcclient.InferRequestedOutput(n) for n in outputs]
    result = client.infer("add_sub", _add_sub_inputs(a, b), outputs=requested, request_id="r-1")
    names = outputs or ["OUTPUT0", "OUTPUT1"]
    expected = {"OUTPUT0": a + b, "OUTPUT1": a - b}
    for name in names:
        np.testing.assert_array_equal(result.as_numpy(name), expected[name])
    response = result.get_response()
    assert [o.name for o in response.outputs] == names
    assert len(response.raw_output_contents) == len(names)
    assert response.model_name == "add_sub"
    assert response.model_version == "1"
    assert response.id == "r-1"


def test_bytes_string_upper(client):
    text = np.array([b"hello", "wörld".encode(), b""], dtype=np.object_)
    inp = grpcclient.InferInput("TEXT", [3], "BYTES")
    inp.set_data_from_numpy(text)
    result = client.infer("string_upper", [inp])
    assert result.as_numpy("UPPER").tolist() == [b"HELLO", "WÖRLD".encode(), b""]
    np.testing.assert_array_equal(result.as_numpy("LENGTH"), np.array([5, 5, 0], np.int32))


def test_batched_identity(client):
    data = np.arange(12, dtype=np.float32).reshape(3, 4)
    inp = grpcclient.InferInput("INPUT0", [3, 4], "FP32")
    inp.set_data_from_numpy(data)
    result = client.infer("identity", [inp])
    np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), data)


def test_typed_contents_over_the_wire(stub):
    request = service_pb2.ModelInferRequest(model_name="identity", id="typed")
    tensor = request.inputs.add(name="INPUT0", datatype="FP32", shape=[1, 3])
    tensor.contents.fp32_contents.extend([1.5, -2.0, 3.25])
    response = stub.ModelInfer(request)
    out = np.frombuffer(response.raw_output_contents[0], np.float32)
    assert out.tolist() == [1.5, -2.0, 3.25]
    assert list(response.outputs[0].shape) == [1, 3]
    assert response.id == "typed"


def test_unknown_model_is_not_found(client):
    inp = grpcclient.InferInput("INPUT0", [1, 1], "FP32")
    inp.set_data_from_numpy(np.zeros((1, 1), np.float32))
    with pytest.raises(InferenceServerException) as err:
        client.infer("no_such_model", [inp])
    # Triton's text; the code is NOT_FOUND as on HTTP (404)
    assert err.value.status() == "StatusCode.NOT_FOUND"
    assert "Request for unknown model: 'no_such_model' is not found" in err.value.message()


def test_wrong_dtype_is_invalid_argument(client):
    inputs = [grpcclient.InferInput("INPUT0", [4], "INT32"), grpcclient.InferInput("INPUT1", [4], "INT32")]
    for i in inputs:
        i.set_data_from_numpy(np.zeros(4, np.int32))
    with pytest.raises(InferenceServerException) as err:
        client.infer("add_sub", inputs)
    assert err.value.status() == "StatusCode.INVALID_ARGUMENT"


def test_raw_size_mismatch_is_invalid_argument(stub):
    request = service_pb2.ModelInferRequest(model_name="identity")
    request.inputs.add(name="INPUT0", datatype="FP32", shape=[1, 1000000000])
    request.raw_input_contents.append(b"\0" * 8)
    with pytest.raises(grpc.RpcError) as err:
        stub.ModelInfer(request)
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "Expected 4000000000, got 8" in err.value.details()


def test_unimplemented_methods_answer(stub):
    with pytest.raises(grpc.RpcError) as err:
        stub.RepositoryIndex(service_pb2.RepositoryIndexRequest())
    assert err.value.code() == grpc.StatusCode.UNIMPLEMENTED
    assert "repository" in err.value.details()


def test_statistics(client):
    a = np.ones(4, np.float32)
    client.infer("add_sub", _add_sub_inputs(a, a))
    stats = client.get_inference_statistics("add_sub", as_json=True)["model_stats"]
    assert stats[0]["name"] == "add_sub"
    assert int(stats[0]["inference_stats"]["success"]["count"]) >= 1
    everything = client.get_inference_statistics(as_json=True)["model_stats"]
    assert {s["name"] for s in everything} == {"add_sub", "identity", "string_upper"}


# ------------------------------------------------------------------------ stream


def test_stream_continues_after_an_error(grpc_url):
    results: queue.Queue = queue.Queue()
    c = grpcclient.InferenceServerClient(grpc_url)
    try:
        c.start_stream(callback=lambda result, error: results.put((result, error)))
        bad = [grpcclient.InferInput("INPUT0", [4], "INT32"), grpcclient.InferInput("INPUT1", [4], "INT32")]
        for i in bad:
            i.set_data_from_numpy(np.zeros(4, np.int32))
        c.async_stream_infer("add_sub", bad, request_id="bad")
        a = np.array([1, 2, 3, 4], np.float32)
        c.async_stream_infer("add_sub", _add_sub_inputs(a, a), request_id="good")
        got = [results.get(timeout=60) for _ in range(2)]
    finally:
        c.stop_stream()
        c.close()
    errors = [e for _, e in got if e is not None]
    oks = [r for r, e in got if e is None]
    assert len(errors) == 1 and len(oks) == 1
    assert "INPUT0" in errors[0].message()
    np.testing.assert_array_equal(oks[0].as_numpy("OUTPUT0"), a + a)
    assert oks[0].get_response().id == "good"


# ------------------------------------------------------------ codec (no sockets)

TYPED = {
    "BOOL": ("bool_contents", [True, False]),
    "INT8": ("int_contents", [-128, 127]),
    "INT16": ("int_contents", [-32768, 32767]),
    "INT32": ("int_contents", [-(2**31), 2**31 - 1]),
    "INT64": ("int64_contents", [-(2**63), 2**63 - 1]),
    "UINT8": ("uint_contents", [0, 255]),
    "UINT16": ("uint_contents", [0, 65535]),
    "UINT32": ("uint_contents", [0, 2**32 - 1]),
    "UINT64": ("uint64_contents", [0, 2**64 - 1]),
    "FP32": ("fp32_contents", [1.5, -2.0]),
    "FP64": ("fp64_contents", [1e300, -0.5]),
    "BYTES": ("bytes_contents", [b"ab", b""]),
}


@pytest.mark.parametrize("datatype", sorted(TYPED))
def test_decode_typed_contents(datatype):
    field, values = TYPED[datatype]
    message = service_pb2.ModelInferRequest(model_name="m", model_version="2", id="x")
    tensor = message.inputs.add(name="IN", datatype=datatype, shape=[2])
    getattr(tensor.contents, field).extend(values)
    request = decode_infer_request(message)
    assert (request.model_name, request.model_version, request.id) == ("m", "2", "x")
    assert request.inputs[0].data.tolist() == values
    assert request.inputs[0].shape == (2,)


def test_decode_typed_contents_count_must_match_shape():
    message = service_pb2.ModelInferRequest(model_name="m")
    tensor = message.inputs.add(name="IN", datatype="INT32", shape=[3])
    tensor.contents.int_contents.extend([1, 2])
    with pytest.raises(InvalidArgument, match="expected 3"):
        decode_infer_request(message)


def test_decode_raw_bytes_and_parameters():
    message = service_pb2.ModelInferRequest(model_name="m")
    message.inputs.add(name="S", datatype="BYTES", shape=[2])
    message.inputs.add(name="F", datatype="FP16", shape=[2])
    message.raw_input_contents.append(b"\x01\x00\x00\x00a\x00\x00\x00\x00")
    message.raw_input_contents.append(np.array([1, 2], np.float16).tobytes())
    message.parameters["sequence_id"].uint64_param = 42
    message.parameters["sequence_start"].bool_param = True
    message.parameters["sequence_end"].bool_param = True
    message.parameters["priority"].uint64_param = 3
    message.parameters["timeout"].int64_param = 5000
    message.parameters["custom"].string_param = "v"
    message.outputs.add(name="OUT")
    request = decode_infer_request(message)
    assert request.inputs[0].data.tolist() == [b"a", b""]
    assert request.inputs[1].data.tolist() == [1.0, 2.0]
    assert request.correlation_id == 42
    assert request.flags == 3
    assert (request.priority, request.timeout_us) == (3, 5000)
    assert request.parameters == {"custom": "v"}
    assert [o.name for o in request.outputs] == ["OUT"]


@pytest.mark.parametrize(
    "raw",
    [b"\x05\x00\x00\x00ab", b"\x01\x00\x00\x00a", b"\x01\x00\x00\x00a\x00\x00\x00\x00\x00"],
)
def test_decode_rejects_bad_bytes(raw):
    message = service_pb2.ModelInferRequest(model_name="m")
    message.inputs.add(name="S", datatype="BYTES", shape=[2])
    message.raw_input_contents.append(raw)
    with pytest.raises(InvalidArgument):
        decode_infer_request(message)


def test_decode_rejects_raw_count_mismatch_and_reserved_keys():
    message = service_pb2.ModelInferRequest(model_name="m")
    message.inputs.add(name="A", datatype="FP32", shape=[1])
    message.inputs.add(name="B", datatype="FP32", shape=[1])
    message.raw_input_contents.append(b"\0" * 4)
    with pytest.raises(InvalidArgument, match="raw input contents"):
        decode_infer_request(message)
    message = service_pb2.ModelInferRequest(model_name="m")
    message.parameters["triton_x"].bool_param = True
    with pytest.raises(InvalidArgument, match="reserved"):
        decode_infer_request(message)
    message = service_pb2.ModelInferRequest(model_name="m")
    tensor = message.inputs.add(name="A", datatype="FP32", shape=[1])
    tensor.parameters["shared_memory_region"].string_param = "r"
    with pytest.raises(Unsupported):
        decode_infer_request(message)


def test_encode_response():
    response = InferResponse(
        "m",
        "1",
        id="x",
        outputs=[
            OutputTensor("A", "INT32", (2,), np.array([1, 2], np.int32)),
            OutputTensor("S", "BYTES", (1,), np.array([b"hi"], np.object_)),
        ],
        parameters={"flag": True, "n": 7},
    )
    message = encode_infer_response(response)
    assert (message.model_name, message.model_version, message.id) == ("m", "1", "x")
    assert [(o.name, o.datatype, list(o.shape)) for o in message.outputs] == [
        ("A", "INT32", [2]),
        ("S", "BYTES", [1]),
    ]
    assert list(message.raw_output_contents) == [
        np.array([1, 2], "<i4").tobytes(),
        b"\x02\x00\x00\x00hi",
    ]
    assert message.parameters["flag"].bool_param is True
    assert message.parameters["n"].int64_param == 7


def test_model_config_response_from_json():
    reply = model_config_response(
        {"name": "m", "max_batch_size": 8, "input": [{"name": "I", "data_type": "TYPE_FP32", "dims": [-1]}],
         "unknown_key": 1}
    )
    assert reply.config.name == "m"
    assert reply.config.max_batch_size == 8
    assert list(reply.config.input[0].dims) == [-1]


def test_streaming_clients_final_response_flag_is_accepted_not_passed_on():
    # perf_analyzer --streaming sends this Triton-reserved key; other triton_* keys stay refused.
    request = service_pb2.ModelInferRequest(model_name="add_sub")
    request.parameters["triton_enable_empty_final_response"].bool_param = True
    request.parameters["mine"].string_param = "x"
    decoded = decode_infer_request(request)
    assert decoded.parameters == {"mine": "x"}
    request.parameters["triton_other"].bool_param = True
    with pytest.raises(InvalidArgument, match="reserved"):
        decode_infer_request(request)
