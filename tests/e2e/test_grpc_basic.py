"""The gRPC protocol layer without a client: the sans-IO codec and grpc.aio start-up options.

What a client sees over the wire is tested in test_grpc_client.py and test_grpc_server.py,
against every transport.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import grpc
import numpy as np
import pytest
from tritonclient.grpc import service_pb2

from tritium.core.errors import InvalidArgument
from tritium.core.types import InferResponse, OutputTensor
from tritium.frontends.grpc import (
    GrpcOptions,
    KeepaliveOptions,
    TlsFiles,
    decode_infer_request,
    encode_infer_response,
    model_config_response,
    start_grpc_server,
)
from tritium.frontends.grpc.server import _channel_options
from tritium.server.app import build_service

# ------------------------------------------------------------- grpc.aio start-up options


def _start(options: GrpcOptions) -> None:
    async def main() -> None:
        server = await start_grpc_server(build_service([]).service, options)
        await server.stop(0)

    asyncio.run(main())


def test_unreadable_tls_file_names_the_file_and_flag(tmp_path: Path):
    key = tmp_path / "server.key"
    key.write_text("not read: the certificate is missing")
    missing = tmp_path / "nope.crt"
    tls = TlsFiles(server_cert=str(missing), server_key=str(key))
    with pytest.raises(OSError, match=r"--grpc-server-cert file '.*nope\.crt'"):
        _start(GrpcOptions(host="127.0.0.1", port=0, tls=tls))


def test_unknown_compression_level_is_refused():
    with pytest.raises(ValueError, match="'extreme'"):
        _start(GrpcOptions(host="127.0.0.1", port=0, response_compression="extreme"))


def test_keepalive_flags_become_triton_s_channel_arguments():
    keepalive = KeepaliveOptions(
        time_ms=1000,
        timeout_ms=2000,
        permit_without_calls=True,
        max_pings_without_data=0,
        min_recv_ping_interval_without_data_ms=3000,
        max_ping_strikes=4,
        max_connection_age_ms=5000,
        max_connection_age_grace_ms=6000,
    )
    args = dict(_channel_options(GrpcOptions(keepalive=keepalive, reuse_port=True)))
    assert args == {
        "grpc.max_send_message_length": 2**31 - 1,
        "grpc.max_receive_message_length": 2**31 - 1,
        "grpc.so_reuseport": 1,
        "grpc.keepalive_time_ms": 1000,
        "grpc.keepalive_timeout_ms": 2000,
        "grpc.keepalive_permit_without_calls": 1,
        "grpc.http2.max_pings_without_data": 0,
        "grpc.http2.min_recv_ping_interval_without_data_ms": 3000,
        "grpc.http2.max_ping_strikes": 4,
        "grpc.max_connection_age_ms": 5000,
        "grpc.max_connection_age_grace_ms": 6000,
    }
    # Unset connection ages leave grpc's (unlimited) defaults, as in Triton.
    defaults = dict(_channel_options(GrpcOptions()))
    assert "grpc.max_connection_age_ms" not in defaults
    assert "grpc.max_connection_age_grace_ms" not in defaults
    assert defaults["grpc.keepalive_time_ms"] == 7_200_000


def test_max_connection_age_ends_connections():
    # The server sends GOAWAY once a connection is older than the age: the client's
    # channel leaves READY on its own, and the next call reconnects unaided.
    keepalive = KeepaliveOptions(max_connection_age_ms=300, max_connection_age_grace_ms=300)

    async def main() -> None:
        server = await start_grpc_server(
            build_service([]).service,
            GrpcOptions(host="127.0.0.1", port=0, keepalive=keepalive),
        )
        try:
            async with grpc.aio.insecure_channel(f"127.0.0.1:{server.port}") as channel:
                live = channel.unary_unary(
                    "/inference.GRPCInferenceService/ServerLive",
                    request_serializer=service_pb2.ServerLiveRequest.SerializeToString,
                    response_deserializer=service_pb2.ServerLiveResponse.FromString,
                )
                assert (await live(service_pb2.ServerLiveRequest(), timeout=10)).live
                assert channel.get_state() == grpc.ChannelConnectivity.READY
                await asyncio.wait_for(
                    channel.wait_for_state_change(grpc.ChannelConnectivity.READY), timeout=10
                )
                assert (await live(service_pb2.ServerLiveRequest(), timeout=10)).live
        finally:
            await server.stop(0)

    asyncio.run(main())


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
    with pytest.raises(InvalidArgument) as info:
        decode_infer_request(message)
    assert info.value.message == (
        "[request id: <id_unknown>] input byte size mismatch for input 'IN' for model 'm'. "
        "Expected 12, got 8"
    )


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
    with pytest.raises(InvalidArgument) as info:
        decode_infer_request(message)
    # Triton's text: inputs are checked in turn, and B is the first without data.
    assert info.value.message == "unable to find data for input tensor 'B' for model 'm' in request."
    message.raw_input_contents.extend([b"\0" * 4] * 2)
    with pytest.raises(InvalidArgument) as info:
        decode_infer_request(message)
    assert info.value.message == (
        "expected 2 raw input contents (one per input not in shared memory) for model 'm', got 3"
    )
    message = service_pb2.ModelInferRequest(model_name="m")
    message.parameters["triton_x"].bool_param = True
    with pytest.raises(InvalidArgument, match="reserved"):
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
