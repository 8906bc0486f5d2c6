"""CPU per response-cache hit of the HTTP infer path, in process, without sockets.

Serves ``identity_cached`` (bench/model_repository) with a response cache, answers one
request (the miss, run by the model's worker), then feeds the same request again and
again into the HTTP protocol over a fake transport, each with a new id as perf_analyzer
sends them. Every one is a hit: the number printed is the main process's own Python cost
per hit (parse, plan, key, lookup, answer), without the socket syscalls:

    .venv/bin/python bench/cache_hit_cpu.py [--requests N] [--profile]
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import pstats
import time
from pathlib import Path

from tritium.frontends.http.handlers import KServeRoutes
from tritium.frontends.http.protocol import HttpProtocol
from tritium.frontends.http.router import Router
from tritium.service.cache import ResponseStore
from tritium.testing.fakes import FakeTransport
from tritium.testing.in_process import serving

REPOSITORY = Path(__file__).resolve().parent / "model_repository"
_HEADER = (
    b'{"id":"%d","inputs":[{"name":"INPUT0","datatype":"FP32","shape":[1,16],'
    b'"parameters":{"binary_data_size":64}}],'
    b'"outputs":[{"name":"OUTPUT0","parameters":{"binary_data":true}}]}'
)


def request_bytes(number: int) -> bytes:
    """perf_analyzer's request for identity_cached, numbered ``number``."""
    header = _HEADER % number
    body = header + bytes(64)
    return (
        b"POST /v2/models/identity_cached/infer HTTP/1.1\r\nHost: 127.0.0.1:8000\r\n"
        b"User-Agent: libcurl-agent/1.0\r\nAccept: */*\r\n"
        b"Inference-Header-Content-Length: %d\r\nContent-Type: application/octet-stream\r\n"
        b"Content-Length: %d\r\n\r\n" % (len(header), len(body))
    ) + body


async def measure(requests: int, profile: bool) -> float:
    async with serving(
        [REPOSITORY], ["identity_cached"], response_store=ResponseStore(1 << 20)
    ) as (_, service):
        router = Router()
        KServeRoutes(service, 1 << 26).register(router)
        protocol = HttpProtocol(router, set(), max_input_size=1 << 26)
        transport = FakeTransport()
        protocol.connection_made(transport)
        protocol.data_received(request_bytes(0))  # the miss
        for _ in range(500):
            if transport.data:
                break
            await asyncio.sleep(0.01)
        assert transport.data.startswith(b"HTTP/1.1 200"), bytes(transport.data[:200])
        batch = [request_bytes(n) for n in range(1, requests + 1)]
        for data in batch[:1000]:  # warm up: plans, encoded forms
            protocol.data_received(data)
        start = time.process_time()
        for data in batch:
            protocol.data_received(data)
        spent = time.process_time() - start
        if profile:
            profiler = cProfile.Profile()
            profiler.enable()
            for data in batch[: requests // 3]:
                protocol.data_received(data)
            profiler.disable()
            pstats.Stats(profiler).sort_stats("tottime").print_stats(25)
        protocol.connection_lost(None)
        return 1e6 * spent / requests


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=30_000)
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args()
    per_hit = asyncio.run(measure(args.requests, args.profile))
    print(f"{per_hit:.2f} µs of main-process CPU per HTTP hit (no syscalls)")


if __name__ == "__main__":
    main()
