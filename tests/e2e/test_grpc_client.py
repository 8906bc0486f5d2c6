"""Every ``GRPCInferenceService`` method through the real tritonclient.grpc clients.

Runs once per gRPC transport (``grpc_server`` in conftest). tritonclient sends tensors in
``raw_input_contents``; typed ``contents`` requests are built with ``service_pb2`` and
sent through a plain ``GRPCInferenceServiceStub``.
"""

from __future__ import annotations

import asyncio
import queue
import time

import grpc
import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.grpc.aio as aioclient
from grpc_health.v1 import health_pb2, health_pb2_grpc
from tritonclient.grpc import service_pb2, service_pb2_grpc
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

#: The ``InferTensorContents`` field that carries each datatype (FP16 has none).
TYPED_FIELDS = {
    "BOOL": "bool_contents",
    "UINT8": "uint_contents",
    "UINT16": "uint_contents",
    "UINT32": "uint_contents",
    "UINT64": "uint64_contents",
    "INT8": "int_contents",
    "INT16": "int_contents",
    "INT32": "int_contents",
    "INT64": "int64_contents",
    "FP32": "fp32_contents",
    "FP64": "fp64_contents",
    "BYTES": "bytes_contents",
}


def _sample(dtype: type) -> np.ndarray:
    if dtype is np.object_:
        return np.array([b"hello", "wörld".encode(), b"", b"\x00\xff"], dtype=np.object_)
    if dtype is np.bool_:
        return np.array([True, False, True, True])
    if np.issubdtype(dtype, np.integer):
        info = np.iinfo(dtype)
        return np.array([info.min, 0, 1, info.max], dtype=dtype)
    return np.array([-1.5, 0.0, 2.25, 1e3], dtype=dtype)


def _port_name(wire: str) -> str:
    return "STRING" if wire == "BYTES" else wire


def _add_sub_inputs(a: np.ndarray, b: np.ndarray) -> list[grpcclient.InferInput]:
    inputs = [grpcclient.InferInput("INPUT0", [4], "FP32"), grpcclient.InferInput("INPUT1", [4], "FP32")]
    inputs[0].set_data_from_numpy(a)
    inputs[1].set_data_from_numpy(b)
    return inputs


def _one(name: str, data: np.ndarray, wire: str) -> list[grpcclient.InferInput]:
    inp = grpcclient.InferInput(name, list(data.shape), wire)
    inp.set_data_from_numpy(data)
    return [inp]


def _rpc_error(call, *args, **kwargs) -> grpc.RpcError:
    with pytest.raises(grpc.RpcError) as info:
        call(*args, **kwargs)
    return info.value


@pytest.fixture(scope="module")
def client(grpc_server):
    c = grpcclient.InferenceServerClient(grpc_server.grpc_url)
    yield c
    c.close()


@pytest.fixture(scope="module")
def channel(grpc_server):
    ch = grpc.insecure_channel(
        grpc_server.grpc_url,
        options=[("grpc.max_send_message_length", -1), ("grpc.max_receive_message_length", -1)],
    )
    yield ch
    ch.close()


@pytest.fixture(scope="module")
def stub(channel):
    return service_pb2_grpc.GRPCInferenceServiceStub(channel)


# ------------------------------------------------------------------ health and metadata


def test_server_live_and_ready(client):
    assert client.is_server_live()
    assert client.is_server_ready()


def test_model_ready(client):
    assert client.is_model_ready("add_sub")
    assert client.is_model_ready("add_sub", "1")
    assert client.is_model_ready("versioned_all", "2")
    # Triton answers ready=false (not an error) for unknown models and versions.
    assert not client.is_model_ready("no_such_model")
    assert not client.is_model_ready("versioned_all", "9")


def test_grpc_health_check_serving(channel):
    reply = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest())
    assert reply.status == health_pb2.HealthCheckResponse.SERVING


def test_server_metadata(client):
    meta = client.get_server_metadata(as_json=True)
    assert meta["name"] == "triton"
    assert isinstance(meta["version"], str) and meta["version"]
    assert "statistics" in meta["extensions"]


def test_model_metadata(client):
    meta = client.get_model_metadata("add_sub", as_json=True)
    assert meta == {
        "name": "add_sub",
        "versions": ["1"],
        "platform": "python",
        "inputs": [
            {"name": "INPUT0", "datatype": "FP32", "shape": ["4"]},
            {"name": "INPUT1", "datatype": "FP32", "shape": ["4"]},
        ],
        "outputs": [
            {"name": "OUTPUT0", "datatype": "FP32", "shape": ["4"]},
            {"name": "OUTPUT1", "datatype": "FP32", "shape": ["4"]},
        ],
    }
    # Triton lists every loaded version, or only the one asked for.
    assert client.get_model_metadata("versioned_all").versions == ["1", "2"]
    assert client.get_model_metadata("versioned_all", "2").versions == ["2"]


def test_model_config(client):
    config = client.get_model_config("identity", as_json=True)["config"]
    assert config["name"] == "identity"
    assert config["max_batch_size"] == 64
    assert config["input"][0]["data_type"] == "TYPE_FP32"
    assert "dynamic_batching" in config


def test_model_statistics(client):
    client.infer("add_sub", _add_sub_inputs(np.ones(4, np.float32), np.ones(4, np.float32)))
    stats = client.get_inference_statistics("add_sub", as_json=True)["model_stats"]
    assert [(s["name"], s["version"]) for s in stats] == [("add_sub", "1")]
    assert int(stats[0]["inference_stats"]["success"]["count"]) >= 1
    everything = client.get_inference_statistics(as_json=True)["model_stats"]
    assert {"add_sub", "identity", "echo_all", "versioned_all"} <= {s["name"] for s in everything}


def test_cuda_shared_memory(stub):
    # Triton without a GPU: status lists no regions, unregistering an unknown name is a
    # no-op, and registering fails with an error (never a silent success).
    status = stub.CudaSharedMemoryStatus(service_pb2.CudaSharedMemoryStatusRequest())
    assert len(status.regions) == 0
    stub.CudaSharedMemoryUnregister(service_pb2.CudaSharedMemoryUnregisterRequest(name="r"))
    register = service_pb2.CudaSharedMemoryRegisterRequest(name="r", raw_handle=b"h", device_id=0, byte_size=4)
    err = _rpc_error(stub.CudaSharedMemoryRegister, register)
    assert err.code() in (grpc.StatusCode.UNIMPLEMENTED, grpc.StatusCode.INVALID_ARGUMENT)
    assert "CUDA shared memory" in err.details()


def test_tritonclient_repository_calls(client):
    index = client.get_model_repository_index(as_json=True)["models"]
    assert {"name": "add_sub", "version": "1", "state": "READY"} in index
    client.load_model("add_sub")  # loaded and unchanged: nothing to do, as in Triton
    assert client.is_model_ready("add_sub")


# --------------------------------------------------------------------------- infer


@pytest.mark.parametrize("outputs", [None, ["OUTPUT0", "OUTPUT1"], ["OUTPUT1"]])
def test_add_sub_requested_outputs_and_id(client, outputs):
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
    assert (response.model_name, response.model_version, response.id) == ("add_sub", "1", "r-1")


@pytest.mark.parametrize("wire", sorted(ALL_TYPES))
def test_every_datatype_raw(client, wire):
    data = _sample(ALL_TYPES[wire])
    port = _port_name(wire)
    result = client.infer("echo_all", _one(f"IN_{port}", data, wire), outputs=[grpcclient.InferRequestedOutput(f"OUT_{port}")])
    got = result.as_numpy(f"OUT_{port}")
    assert got.shape == data.shape
    if wire == "BYTES":
        assert list(got) == list(data)
    else:
        assert got.dtype == data.dtype
        np.testing.assert_array_equal(got, data)


def test_bf16_raw(client):
    import ml_dtypes  # tritonclient depends on it

    values = np.array([1.0, -2.0, 0.5, 3.0], dtype=ml_dtypes.bfloat16)
    inp = grpcclient.InferInput("IN_BF16", [4], "BF16")
    inp.set_data_from_numpy(values)
    result = client.infer("echo_all", [inp], outputs=[grpcclient.InferRequestedOutput("OUT_BF16")])
    raw = result.get_response().raw_output_contents[0]
    np.testing.assert_array_equal(np.frombuffer(raw, ml_dtypes.bfloat16).astype(np.float32), values.astype(np.float32))


@pytest.mark.parametrize("wire", sorted(TYPED_FIELDS))
def test_every_datatype_typed_contents(stub, wire):
    data = _sample(ALL_TYPES[wire])
    port = _port_name(wire)
    request = service_pb2.ModelInferRequest(model_name="echo_all", id=f"typed-{wire}")
    tensor = request.inputs.add(name=f"IN_{port}", datatype=wire, shape=[len(data)])
    getattr(tensor.contents, TYPED_FIELDS[wire]).extend(data.tolist())
    request.outputs.add(name=f"OUT_{port}")
    response = stub.ModelInfer(request)
    assert response.id == f"typed-{wire}"
    assert [(o.name, o.datatype, list(o.shape)) for o in response.outputs] == [(f"OUT_{port}", wire, [4])]
    raw = response.raw_output_contents[0]
    if wire == "BYTES":
        expected = b"".join(len(s).to_bytes(4, "little") + s for s in data)
        assert raw == expected
    else:
        np.testing.assert_array_equal(np.frombuffer(raw, data.dtype), data)


def test_bytes_are_length_prefixed_on_the_wire(stub):
    items = [b"hello", "wörld".encode(), b""]
    raw = b"".join(len(s).to_bytes(4, "little") + s for s in items)
    request = service_pb2.ModelInferRequest(model_name="string_upper")
    request.inputs.add(name="TEXT", datatype="BYTES", shape=[3])
    request.raw_input_contents.append(raw)
    response = stub.ModelInfer(request)
    by_name = dict(zip((o.name for o in response.outputs), response.raw_output_contents))
    upper = [b"HELLO", "WÖRLD".encode(), b""]
    assert by_name["UPPER"] == b"".join(len(s).to_bytes(4, "little") + s for s in upper)
    assert np.frombuffer(by_name["LENGTH"], "<i4").tolist() == [5, 5, 0]


def test_batched_identity(client):
    data = np.arange(12, dtype=np.float32).reshape(3, 4)
    result = client.infer("identity", _one("INPUT0", data, "FP32"))
    np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), data)


def test_explicit_versions(client):
    inputs = _one("IN", np.array([1], np.int32), "INT32")
    for version in ("1", "2"):
        result = client.infer("versioned_all", inputs, model_version=version)
        assert result.as_numpy("VERSION").tolist() == [int(version)]
        assert result.get_response().model_version == version
    # No version: the highest one answers, as in Triton.
    assert client.infer("versioned_all", inputs).get_response().model_version == "2"


def test_request_parameters_reach_the_model(client):
    # batch_merge sleeps `sleep_ms` (a request parameter) before answering.
    inputs = _one("X", np.array([[7]], np.int32), "INT32")
    start = time.monotonic()
    result = client.infer("batch_merge", inputs, parameters={"sleep_ms": 300, "note": "x", "flag": True})
    assert time.monotonic() - start >= 0.3
    assert result.as_numpy("Y").tolist() == [[7]]


def test_tensor_parameters_are_accepted(stub):
    request = service_pb2.ModelInferRequest(model_name="echo_all")
    tensor = request.inputs.add(name="IN_INT32", datatype="INT32", shape=[2])
    tensor.parameters["tag"].string_param = "v"
    request.raw_input_contents.append(np.array([3, 4], "<i4").tobytes())
    request.outputs.add(name="OUT_INT32").parameters["note"].int64_param = 1
    response = stub.ModelInfer(request)
    assert np.frombuffer(response.raw_output_contents[0], "<i4").tolist() == [3, 4]


def test_client_gzip_request_compression(client):
    data = np.zeros((1, 256 * 1024), np.float32)  # compresses well
    for algorithm in ("gzip", "deflate"):
        result = client.infer("identity", _one("INPUT0", data, "FP32"), compression_algorithm=algorithm)
        np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), data)


def test_64_mb_tensor_round_trip(client):
    data = np.arange(16 * 1024 * 1024, dtype=np.float32).reshape(1, -1)  # 64 MiB
    result = client.infer("identity", _one("INPUT0", data, "FP32"), client_timeout=60)
    np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), data)


# -------------------------------------------------------------------------- asyncio


def test_aio_client(grpc_server):
    async def main():
        async with aioclient.InferenceServerClient(grpc_server.grpc_url) as c:
            assert await c.is_server_ready()
            assert await c.is_model_ready("add_sub")
            assert (await c.get_model_metadata("add_sub")).name == "add_sub"
            a = np.array([1, 2, 3, 4], np.float32)
            results = await asyncio.gather(
                *(c.infer("add_sub", _add_sub_inputs(a, a * i), request_id=str(i)) for i in range(8))
            )
            for i, result in enumerate(results):
                assert result.get_response().id == str(i)
                np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), a + a * i)
            with pytest.raises(InferenceServerException) as info:
                await c.infer("no_such_model", _add_sub_inputs(a, a))
            assert info.value.status() == "StatusCode.NOT_FOUND"

    asyncio.run(main())


def test_aio_stream_infer(grpc_server):
    a = np.array([1, 2, 3, 4], np.float32)

    async def requests():
        for i in range(4):
            yield {"model_name": "add_sub", "inputs": _add_sub_inputs(a, a * i), "request_id": f"s{i}"}

    async def main():
        async with aioclient.InferenceServerClient(grpc_server.grpc_url) as c:
            got = {}
            async for result, error in c.stream_infer(requests()):
                assert error is None
                got[result.get_response().id] = result.as_numpy("OUTPUT1")
                if len(got) == 4:
                    break
            return got

    got = asyncio.run(main())
    for i in range(4):
        np.testing.assert_array_equal(got[f"s{i}"], a - a * i)


# ------------------------------------------------------------------------ streaming


def test_stream_responses_carry_request_ids(grpc_server):
    results: queue.Queue = queue.Queue()
    c = grpcclient.InferenceServerClient(grpc_server.grpc_url)
    a = np.array([1, 2, 3, 4], np.float32)
    try:
        c.start_stream(callback=lambda result, error: results.put((result, error)))
        for i in range(6):
            c.async_stream_infer("add_sub", _add_sub_inputs(a, a * i), request_id=f"id{i}")
        got = [results.get(timeout=60) for _ in range(6)]
    finally:
        c.stop_stream()
        c.close()
    assert all(error is None for _, error in got)
    by_id = {r.get_response().id: r for r, _ in got}
    assert sorted(by_id) == [f"id{i}" for i in range(6)]
    for i in range(6):
        np.testing.assert_array_equal(by_id[f"id{i}"].as_numpy("OUTPUT0"), a + a * i)


# ------------------------------------------------------------ deadlines, cancellation


def test_deadline_exceeded_and_the_server_keeps_serving(client, grpc_server):
    tag = f"deadline-{grpc_server.grpc_port}"
    inputs = _one("TAG", np.array([tag.encode()], np.object_), "BYTES")
    with pytest.raises(InferenceServerException) as info:
        client.infer("cancellable", inputs, client_timeout=0.5)
    assert info.value.status() == "StatusCode.DEADLINE_EXCEEDED"
    # The model sees the cancellation and stops early instead of running out its 10 s.
    assert grpc_server.wait_for_log(f"cancellable {tag} cancelled=True", timeout=8), grpc_server.log[-2000:]
    a = np.ones(4, np.float32)
    np.testing.assert_array_equal(client.infer("add_sub", _add_sub_inputs(a, a)).as_numpy("OUTPUT0"), a + a)


def test_client_cancellation(client, grpc_server):
    tag = f"cancel-{grpc_server.grpc_port}"
    done: queue.Queue = queue.Queue()
    inputs = _one("TAG", np.array([tag.encode()], np.object_), "BYTES")
    call = client.async_infer("cancellable", inputs, callback=lambda result, error: done.put((result, error)))
    call.cancel()
    result, error = done.get(timeout=30)
    assert result is None and error is not None
    assert "CANCELLED" in str(error.status())
    assert client.is_server_live()
    assert client.infer("versioned_all", _one("IN", np.array([1], np.int32), "INT32")).as_numpy("VERSION").tolist() == [2]
