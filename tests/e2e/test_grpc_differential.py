"""The two gRPC transports answer alike: the same calls to a ``native`` and a ``grpcio``
server give the same messages, status codes, error texts and metadata keys.

Both transports serve one method table (``frontends/grpc/calls.py``); this pins that
nothing transport-specific (error mapping, stream handling, compression choice) drifts.
Each case runs against both servers and the outcomes are compared whole, so a case
needs no expected value of its own.
"""

from __future__ import annotations

import os
import socket
import struct
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import grpc
import h2.config
import h2.connection
import h2.events
import numpy as np
import pytest
import tritonclient.utils.shared_memory as shm
from google.protobuf.json_format import MessageToDict
from grpc_health.v1 import health_pb2, health_pb2_grpc
from tritonclient.grpc import service_pb2, service_pb2_grpc

from tritium.testing import ServerProcess

ROOT = Path(__file__).resolve().parents[2]
REPOSITORIES = [ROOT / "tests" / "models", ROOT / "examples" / "model_repository"]
MODELS = ("add_sub", "identity", "string_upper", "echo_all", "faulty", "versioned_all", "reshape")
TRANSPORTS = ("native", "grpcio")

# Compression on, so the choice of which responses are compressed is compared too (it
# shows in the ``grpc-encoding`` initial metadata).
FLAGS = ["--model-control-mode=explicit", "--grpc-infer-response-compression-level=high"]

# Statistics fields that legitimately differ between two servers given the same calls:
# durations (``ns``) and the wall-clock time of the last inference (``last_inference``)
# measure each server's own timing, never its protocol behaviour. Counts are kept.
_TIMING_KEYS = ("ns", "last_inference")


class Transport:
    """One server and its stubs."""

    def __init__(self, server: ServerProcess) -> None:
        self.server = server
        self.channel = grpc.insecure_channel(server.grpc_url)
        self.stub = service_pb2_grpc.GRPCInferenceServiceStub(self.channel)
        self.health = health_pb2_grpc.HealthStub(self.channel)


@pytest.fixture(scope="module")
def transports() -> Iterator[dict[str, Transport]]:
    servers = {
        name: ServerProcess(
            REPOSITORIES,
            [
                f"--grpc-implementation={name}",
                *FLAGS,
                *(f"--load-model={m}" for m in MODELS),
            ],
            grpc=True,
        )
        for name in TRANSPORTS
    }
    started: dict[str, Transport] = {}
    try:
        for name, server in servers.items():
            server.start()
            assert server.grpc_port is not None, server.log[-3000:]
            started[name] = Transport(server)
        yield started
    finally:
        for transport in started.values():
            transport.channel.close()
        for server in servers.values():
            server.stop()


# ------------------------------------------------------------------ outcomes


def _strip_timings(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _strip_timings(v) for k, v in value.items() if k not in _TIMING_KEYS}
    if isinstance(value, list):
        return [_strip_timings(v) for v in value]
    return value


def _message(message: Any) -> dict:
    return _strip_timings(MessageToDict(message, preserving_proto_field_name=True))


def _serialized(message: Any) -> str:
    """The exact bytes, where no timing field makes them differ legitimately."""
    whole = MessageToDict(message, preserving_proto_field_name=True)
    # Deterministic: map fields (log and trace settings) have no defined wire order.
    serialized = message.SerializeToString(deterministic=True)
    return serialized.hex() if _strip_timings(whole) == whole else "(timings)"


def _metadata(metadata: Any) -> list[str]:
    # Keys only: grpcio hides its transport headers, so what a client sees here is
    # metadata the server chose to send (values such as dates would differ).
    return sorted(key for key, _ in metadata or ())


def unary(transport: Transport, method: str, request: Any) -> dict:
    """Outcome of one unary call: response or status, plus metadata."""
    stub = transport.health if method == "Check" else transport.stub
    try:
        response, call = getattr(stub, method).with_call(request, timeout=60)
    except grpc.RpcError as error:
        return {
            "code": error.code().name,
            "details": error.details(),
            "initial": _metadata(error.initial_metadata()),
            "trailing": _metadata(error.trailing_metadata()),
        }
    return {
        "code": call.code().name,
        "response": _message(response),
        "serialized": _serialized(response),
        "initial": _metadata(call.initial_metadata()),
        "trailing": _metadata(call.trailing_metadata()),
    }


def raw_call(port: int, method: str, message: Any) -> dict:
    """One call over a bare HTTP/2 connection, for what grpcio's client hides: the
    response's ``grpc-encoding`` and each message's compressed flag."""
    conn = h2.connection.H2Connection(
        h2.config.H2Configuration(client_side=True, header_encoding="utf-8")
    )
    conn.initiate_connection()
    headers = [
        (":method", "POST"),
        (":scheme", "http"),
        (":path", f"/inference.GRPCInferenceService/{method}"),
        (":authority", f"127.0.0.1:{port}"),
        ("content-type", "application/grpc"),
        ("te", "trailers"),
        ("grpc-accept-encoding", "identity,deflate,gzip"),
    ]
    body = message.SerializeToString()
    conn.send_headers(1, headers)
    conn.send_data(1, struct.pack(">BI", 0, len(body)) + body, end_stream=True)
    fields: dict[str, str] = {}
    data = bytearray()
    with socket.create_connection(("127.0.0.1", port), timeout=60) as sock:
        sock.sendall(conn.data_to_send())
        ended = False
        while not ended:
            chunk = sock.recv(1 << 16)
            if not chunk:
                break
            for event in conn.receive_data(chunk):
                if isinstance(event, (h2.events.ResponseReceived, h2.events.TrailersReceived)):
                    fields.update(dict(event.headers))
                elif isinstance(event, h2.events.DataReceived):
                    data += event.data
                    conn.acknowledge_received_data(event.flow_controlled_length, 1)
                ended = ended or isinstance(event, (h2.events.StreamEnded, h2.events.StreamReset))
            sock.sendall(conn.data_to_send())
    flags = []
    while data:
        compressed, length = struct.unpack(">BI", data[:5])
        flags.append(compressed)
        del data[: 5 + length]
    return {
        "status": fields.get("grpc-status"),
        "encoding": fields.get("grpc-encoding", "identity"),
        "compressed": flags,
    }


def both(transports: dict[str, Transport], call: Callable[[Transport], Any]) -> Any:
    """Run ``call`` on every transport and require the same outcome; returns it."""
    outcomes = {name: call(t) for name, t in transports.items()}
    native, grpcio = outcomes["native"], outcomes["grpcio"]
    assert native == grpcio, f"transports disagree:\nnative: {native}\ngrpcio: {grpcio}"
    return native


# ------------------------------------------------------------------- requests


def add_sub(request_id: str = "") -> service_pb2.ModelInferRequest:
    request = service_pb2.ModelInferRequest(model_name="add_sub", id=request_id)
    for name in ("INPUT0", "INPUT1"):
        tensor = request.inputs.add(name=name, datatype="FP32", shape=[4])
        tensor.contents.fp32_contents.extend([1, 2, 3, 4])
    return request


def faulty(mode: str, request_id: str = "") -> service_pb2.ModelInferRequest:
    request = service_pb2.ModelInferRequest(model_name="faulty", id=request_id)
    request.inputs.add(name="MODE", datatype="BYTES", shape=[1]).contents.bytes_contents.append(
        mode.encode()
    )
    return request


def _infer_cases() -> dict[str, service_pb2.ModelInferRequest]:
    cases: dict[str, service_pb2.ModelInferRequest] = {"good": add_sub("good")}
    raw = service_pb2.ModelInferRequest(model_name="add_sub", id="raw")
    for name in ("INPUT0", "INPUT1"):
        raw.inputs.add(name=name, datatype="FP32", shape=[4])
        raw.raw_input_contents.append(np.arange(4, dtype=np.float32).tobytes())
    raw.outputs.add(name="OUTPUT1")
    cases["raw-one-output"] = raw
    strings = service_pb2.ModelInferRequest(model_name="string_upper")
    strings.inputs.add(name="TEXT", datatype="BYTES", shape=[2]).contents.bytes_contents.extend(
        [b"ab", b"cd"]
    )
    cases["bytes"] = strings
    reshape = service_pb2.ModelInferRequest(model_name="reshape")
    reshape.inputs.add(name="IN", datatype="FP32", shape=[2, 6]).contents.fp32_contents.extend(
        [0.0] * 12
    )
    cases["reshape-batch"] = reshape
    version = service_pb2.ModelInferRequest(model_name="versioned_all", model_version="2")
    version.inputs.add(name="IN", datatype="INT32", shape=[1]).contents.int_contents.append(7)
    cases["version"] = version
    unknown_version = service_pb2.ModelInferRequest()
    unknown_version.CopyFrom(version)
    unknown_version.model_version = "99"
    cases["unknown-version"] = unknown_version
    cases["unknown-model"] = service_pb2.ModelInferRequest(model_name="nope", id="n")
    missing = add_sub("missing")
    del missing.inputs[1]
    cases["missing-input"] = missing
    shape = add_sub()
    shape.inputs[0].shape[:] = [3]
    del shape.inputs[0].contents.fp32_contents[3]
    cases["bad-shape"] = shape
    datatype = add_sub()
    datatype.inputs[0].datatype = "INT32"
    datatype.inputs[0].contents.ClearField("fp32_contents")
    datatype.inputs[0].contents.int_contents.extend([1, 2, 3, 4])
    cases["wrong-datatype"] = datatype
    count = add_sub("count")
    del count.inputs[1].contents.fp32_contents[3]
    cases["contents-count"] = count
    reserved = add_sub()
    reserved.parameters["triton_x"].bool_param = True
    cases["reserved-parameter"] = reserved
    both_data = add_sub()
    both_data.raw_input_contents.extend([np.ones(4, np.float32).tobytes()] * 2)
    cases["contents-and-raw"] = both_data
    unknown_output = add_sub()
    unknown_output.outputs.add(name="NOPE")
    cases["unknown-output"] = unknown_output
    bad_bytes = service_pb2.ModelInferRequest(model_name="string_upper")
    bad_bytes.inputs.add(name="TEXT", datatype="BYTES", shape=[2])
    bad_bytes.raw_input_contents.append(b"\x05\x00\x00\x00ab")
    cases["bad-bytes"] = bad_bytes
    for mode in ("raise", "error", "too_few", "not_a_response"):
        cases[f"faulty-{mode}"] = faulty(mode, mode)
    return cases


INFER_CASES = _infer_cases()

pb = service_pb2
UNARY_CASES: dict[str, tuple[str, Any]] = {
    "server-live": ("ServerLive", pb.ServerLiveRequest()),
    "server-ready": ("ServerReady", pb.ServerReadyRequest()),
    "model-ready": ("ModelReady", pb.ModelReadyRequest(name="add_sub")),
    "model-ready-version": ("ModelReady", pb.ModelReadyRequest(name="versioned_all", version="3")),
    "model-ready-unknown": ("ModelReady", pb.ModelReadyRequest(name="nope")),
    "model-ready-unknown-version": (
        "ModelReady",
        pb.ModelReadyRequest(name="add_sub", version="9"),
    ),
    "server-metadata": ("ServerMetadata", pb.ServerMetadataRequest()),
    "model-metadata": ("ModelMetadata", pb.ModelMetadataRequest(name="echo_all")),
    "model-metadata-version": (
        "ModelMetadata",
        pb.ModelMetadataRequest(name="versioned_all", version="1"),
    ),
    "model-metadata-unknown": ("ModelMetadata", pb.ModelMetadataRequest(name="nope")),
    "model-metadata-bad-version": (
        "ModelMetadata",
        pb.ModelMetadataRequest(name="add_sub", version="x"),
    ),
    "model-config": ("ModelConfig", pb.ModelConfigRequest(name="identity")),
    "model-config-unknown": ("ModelConfig", pb.ModelConfigRequest(name="nope")),
    "model-config-unknown-version": (
        "ModelConfig",
        pb.ModelConfigRequest(name="versioned_all", version="7"),
    ),
    "model-statistics-unknown": ("ModelStatistics", pb.ModelStatisticsRequest(name="nope")),
    "repository-index": ("RepositoryIndex", pb.RepositoryIndexRequest()),
    "repository-load": ("RepositoryModelLoad", pb.RepositoryModelLoadRequest(model_name="x")),
    "repository-unload": (
        "RepositoryModelUnload",
        pb.RepositoryModelUnloadRequest(model_name="x"),
    ),
    "trace-setting": ("TraceSetting", pb.TraceSettingRequest()),
    "log-settings": ("LogSettings", pb.LogSettingsRequest()),
    "cuda-status": ("CudaSharedMemoryStatus", pb.CudaSharedMemoryStatusRequest()),
    "cuda-status-unknown": ("CudaSharedMemoryStatus", pb.CudaSharedMemoryStatusRequest(name="x")),
    "cuda-register": (
        "CudaSharedMemoryRegister",
        pb.CudaSharedMemoryRegisterRequest(name="c", raw_handle=b"\0" * 64, byte_size=16),
    ),
    "cuda-unregister": ("CudaSharedMemoryUnregister", pb.CudaSharedMemoryUnregisterRequest()),
    "system-status": ("SystemSharedMemoryStatus", pb.SystemSharedMemoryStatusRequest()),
    "system-status-unknown": (
        "SystemSharedMemoryStatus",
        pb.SystemSharedMemoryStatusRequest(name="nope"),
    ),
    "system-register-missing-key": (
        "SystemSharedMemoryRegister",
        pb.SystemSharedMemoryRegisterRequest(name="r", key="/tritium-no-such-key", byte_size=16),
    ),
    "system-unregister-unknown": (
        "SystemSharedMemoryUnregister",
        pb.SystemSharedMemoryUnregisterRequest(name="nope"),
    ),
    "health-check": ("Check", health_pb2.HealthCheckRequest()),
    "health-check-service": ("Check", health_pb2.HealthCheckRequest(service="x")),
}


# ---------------------------------------------------------------------- tests


@pytest.mark.parametrize("case", sorted(UNARY_CASES))
def test_unary_methods_agree(transports, case):
    method, request = UNARY_CASES[case]
    both(transports, lambda t: unary(t, method, request))


@pytest.mark.parametrize("case", sorted(INFER_CASES))
def test_model_infer_agrees(transports, case):
    both(transports, lambda t: unary(t, "ModelInfer", INFER_CASES[case]))


def test_statistics_agree_after_the_same_calls(transports):
    # Every infer case ran on both servers (or none, when run alone), so counts agree.
    for name in ("add_sub", "faulty", "versioned_all", ""):
        request = pb.ModelStatisticsRequest(name=name)
        outcome = both(transports, lambda t, r=request: unary(t, "ModelStatistics", r))
        assert outcome["code"] == "OK"


def test_unknown_method_agrees(transports):
    def call(t: Transport) -> dict:
        nope = t.channel.unary_unary(
            "/inference.GRPCInferenceService/Nope",
            request_serializer=pb.ServerLiveRequest.SerializeToString,
            response_deserializer=pb.ServerLiveResponse.FromString,
        )
        with pytest.raises(grpc.RpcError) as info:
            nope(pb.ServerLiveRequest(), timeout=60)
        return {"code": info.value.code().name, "details": info.value.details()}

    assert both(transports, call)["code"] == "UNIMPLEMENTED"


def test_stream_of_good_and_bad_requests_agrees(transports):
    requests = [
        add_sub("good-1"),
        INFER_CASES["missing-input"],
        INFER_CASES["unknown-model"],
        faulty("raise", "raise"),
        faulty("error", "error"),
        INFER_CASES["contents-count"],
        add_sub("good-2"),
    ]

    def call(t: Transport) -> dict:
        replies = t.stub.ModelStreamInfer(iter(requests), timeout=60)
        # Replies come in completion order, which is timing; the id says which is which.
        answers = sorted((_message(r) for r in replies), key=lambda r: str(r))
        return {
            "code": replies.code().name,
            "replies": answers,
            "initial": _metadata(replies.initial_metadata()),
            "trailing": _metadata(replies.trailing_metadata()),
        }

    outcome = both(transports, call)
    assert len(outcome["replies"]) == len(requests)


@pytest.mark.parametrize(
    ("method", "message"),
    [
        ("ModelInfer", add_sub("c")),
        ("ModelInfer", INFER_CASES["unknown-model"]),
        ("ModelStreamInfer", add_sub("s")),
        ("ServerMetadata", pb.ServerMetadataRequest()),
        ("ModelConfig", pb.ModelConfigRequest(name="add_sub")),
    ],
    ids=["infer", "infer-error", "stream", "metadata", "config"],
)
def test_only_inference_responses_are_compressed_alike(transports, method, message):
    outcome = both(transports, lambda t: raw_call(t.server.grpc_port, method, message))
    if method.endswith("Infer") and outcome["status"] == "0":
        assert outcome["compressed"] == [1]
    else:
        assert 1 not in outcome["compressed"]


def test_system_shared_memory_register_status_unregister_agree(transports):
    name = "diff"
    key = f"/tritium_diff_{os.getpid()}_{uuid.uuid4().hex[:8]}"
    handle = shm.create_shared_memory_region(name, key, 64)
    try:
        steps = [
            (
                "SystemSharedMemoryRegister",
                pb.SystemSharedMemoryRegisterRequest(name=name, key=key, offset=0, byte_size=64),
            ),
            (
                "SystemSharedMemoryRegister",
                pb.SystemSharedMemoryRegisterRequest(name=name, key=key, offset=0, byte_size=64),
            ),  # already registered
            (
                "SystemSharedMemoryRegister",
                pb.SystemSharedMemoryRegisterRequest(
                    name="too-big", key=key, offset=32, byte_size=64
                ),
            ),
            ("SystemSharedMemoryStatus", pb.SystemSharedMemoryStatusRequest()),
            ("SystemSharedMemoryStatus", pb.SystemSharedMemoryStatusRequest(name=name)),
            ("SystemSharedMemoryUnregister", pb.SystemSharedMemoryUnregisterRequest(name=name)),
            ("SystemSharedMemoryStatus", pb.SystemSharedMemoryStatusRequest(name=name)),
        ]
        for method, request in steps:
            both(transports, lambda t, m=method, r=request: unary(t, m, r))
    finally:
        for t in transports.values():
            t.stub.SystemSharedMemoryUnregister(pb.SystemSharedMemoryUnregisterRequest())
        shm.destroy_shared_memory_region(handle)
