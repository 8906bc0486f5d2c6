"""CPU per call of the native gRPC ModelInfer path, in process, without sockets or workers.

Feeds the same add_sub ModelInfer request (HEADERS + DATA frames, HPACK-indexed headers as a
grpc client sends them on a warm connection) into the native transport over and over,
through the call, the codec, the service and the scheduler, with an instance that answers at
once. The number printed is the main process's own Python cost per call; unary calls and
calls on one ModelStreamInfer stream are measured separately:

    .venv/bin/python bench/grpc_path_cpu.py [--requests N] [--profile] [--stream]
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import pstats
import sys
import time
from pathlib import Path

# Run as a script, bench/ itself is on sys.path; shared pieces are imported as `bench.*`.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np
import uvloop
from hpack import Encoder
from tritonclient.grpc import service_pb2

from bench.add_sub import InstantModels  # noqa: E402
from tritium.core.heap import settle_heap
from tritium.frontends.grpc.native import frames as f
from tritium.frontends.grpc.native.server import GrpcProtocol, _Shared
from tritium.frontends.grpc.options import GrpcOptions
from tritium.server.app import build_service


class _Transport:
    """Counts written bytes and finished calls (grpc-status 0 trailers)."""

    def __init__(self) -> None:
        self.writes = 0
        self.bytes = 0

    def write(self, data: bytes) -> None:
        self.writes += 1
        self.bytes += len(data)

    def is_closing(self) -> bool:
        return False

    def get_extra_info(self, *args):
        return None

    def close(self) -> None:
        raise SystemExit("the server closed the connection")

    def abort(self) -> None:
        raise SystemExit("the server aborted the connection")


def _message() -> bytes:
    request = service_pb2.ModelInferRequest(model_name="add_sub")
    for name in ("INPUT0", "INPUT1"):
        request.inputs.add(name=name, datatype="FP32", shape=[4])
        request.raw_input_contents.append(np.ones(4, np.float32).tobytes())
    for name in ("OUTPUT0", "OUTPUT1"):
        request.outputs.add(name=name)
    payload = request.SerializeToString()
    return b"\x00" + len(payload).to_bytes(4, "big") + payload


_HEADERS = [
    (":method", "POST"),
    (":scheme", "http"),
    (":path", "/inference.GRPCInferenceService/ModelInfer"),
    (":authority", "127.0.0.1:8001"),
    ("te", "trailers"),
    ("content-type", "application/grpc"),
    ("user-agent", "grpc-c++/1.67.0 grpc-c/44.0.0 (linux; chttp2)"),
    ("grpc-accept-encoding", "identity, deflate, gzip"),
]


class _Client:
    """Client frames for unary calls (each its own stream) or one stream's messages."""

    def __init__(self) -> None:
        self.encoder = Encoder()
        self.sid = 1
        self.message = _message()
        # From the second call on every header is indexed: the block stays the same.
        self.first_block = self.encoder.encode(_HEADERS)
        self.block = self.encoder.encode(_HEADERS)

    def unary(self) -> bytes:
        sid, self.sid = self.sid, self.sid + 2
        block = self.first_block if sid == 1 else self.block
        return f.frame(f.HEADERS, f.END_HEADERS, sid, block) + f.frame(
            f.DATA, f.END_STREAM, sid, self.message
        )

    def open_stream(self) -> bytes:
        headers = [(k, v.replace("ModelInfer", "ModelStreamInfer")) for k, v in _HEADERS]
        return f.frame(f.HEADERS, f.END_HEADERS, 1, Encoder().encode(headers))

    def stream_message(self) -> bytes:
        return f.frame(f.DATA, 0, 1, self.message)

    def window_update(self, size: int, stream: bool) -> bytes:
        # What a client grants back for the response bytes it has read.
        update = f.window_update_frame(0, size)
        return update + f.window_update_frame(1, size) if stream else update


async def _run(requests: int, profile: bool, stream: bool) -> None:
    service = build_service([], table=InstantModels()).service  # type: ignore[arg-type]
    service.started = True
    protocol = GrpcProtocol(_Shared(service, GrpcOptions()))
    transport = _Transport()
    protocol.connection_made(transport)  # type: ignore[arg-type]
    client = _Client()
    protocol.data_received(f.PREFACE + f.settings_frame({}))
    if stream:
        protocol.data_received(client.open_stream())
        make = client.stream_message
    else:
        make = client.unary
    sent = 0

    async def burst(count: int) -> None:
        nonlocal sent
        for _ in range(count):
            protocol.data_received(make())
            await asyncio.sleep(0)
            sent += 1
            if sent % 100 == 0:
                protocol.data_received(client.window_update(1 << 16, stream))

    await burst(1000)  # warm caches
    settle_heap()  # as the server does once it is serving
    before = transport.bytes
    profiler = cProfile.Profile() if profile else None
    if profiler is not None:
        profiler.enable()
    start = time.process_time()
    await burst(requests)
    spent = time.process_time() - start
    if profiler is not None:
        profiler.disable()
        pstats.Stats(profiler).sort_stats("tottime").print_stats(25)
    for _ in range(3):
        await asyncio.sleep(0)
    per_call = (transport.bytes - before) / requests
    if per_call < 40:
        raise SystemExit(f"only {per_call:.0f} bytes written per call: calls are failing")
    kind = "stream message" if stream else "unary call"
    print(f"{spent / requests * 1e6:.1f} µs CPU per {kind} ({requests} calls)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=20000)
    parser.add_argument("--profile", action="store_true", help="print a cProfile summary")
    parser.add_argument("--stream", action="store_true", help="messages on one ModelStreamInfer")
    args = parser.parse_args()
    uvloop.run(_run(args.requests, args.profile, args.stream))


if __name__ == "__main__":
    main()
