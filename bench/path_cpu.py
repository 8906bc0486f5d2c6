"""CPU per request of the server-side infer path, in process, without sockets or workers.

Feeds the same binary add_sub request (as perf_analyzer sends it) into the HTTP protocol
over and over, through the real router, handlers, codec, service and scheduler, with an
instance that answers at once. The number printed is the main process's own Python cost
per request — the part of every request's latency that tritium can shrink without touching
the worker round trip. Deterministic enough to compare changes on a noisy machine:

    .venv/bin/python bench/path_cpu.py [--requests N] [--profile]
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import json
import pstats
import sys
import time
from pathlib import Path

# Run as a script, bench/ itself is on sys.path; shared pieces are imported as `bench.*`.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np
import uvloop

from bench.add_sub import InstantModels  # noqa: E402
from tritium.frontends.http.handlers import KServeRoutes
from tritium.frontends.http.protocol import HttpProtocol
from tritium.frontends.http.router import Router
from tritium.server.app import build_service
from tritium.service.cache import ResponseStore, VersionCache


class _Transport:
    def __init__(self) -> None:
        self.writes = 0
        self.ok = 0

    def write(self, data: bytes) -> None:
        self.writes += 1
        self.ok += data.startswith(b"HTTP/1.1 200 ")

    def is_closing(self) -> bool:
        return False

    def get_extra_info(self, *args):
        return None

    def pause_reading(self) -> None: ...

    def resume_reading(self) -> None: ...

    def close(self) -> None: ...


def _request_bytes() -> bytes:
    header = json.dumps(
        {
            "inputs": [
                {"name": n, "shape": [4], "datatype": "FP32", "parameters": {"binary_data_size": 16}}
                for n in ("INPUT0", "INPUT1")
            ],
            "outputs": [
                {"name": n, "parameters": {"binary_data": True}} for n in ("OUTPUT0", "OUTPUT1")
            ],
        }
    ).encode()
    body = header + np.ones(4, np.float32).tobytes() * 2
    head = (
        b"POST /v2/models/add_sub/infer HTTP/1.1\r\nHost: localhost:8000\r\n"
        b"Content-Type: application/octet-stream\r\n"
        b"Inference-Header-Content-Length: %d\r\nContent-Length: %d\r\n\r\n" % (len(header), len(body))
    )
    return head + body


async def _run(requests: int, profile: bool, cached: bool = False) -> None:
    table = InstantModels()
    if cached:
        # Every request after the first is a response-cache hit.
        loaded = table.loaded
        loaded.cache = VersionCache(  # type: ignore[assignment]
            ResponseStore(1 << 20), loaded.stats, "add_sub", "1", frozenset(("OUTPUT0", "OUTPUT1"))
        )
    service = build_service([], table=table).service  # type: ignore[arg-type]
    service.started = True
    router = Router()
    KServeRoutes(service, 1 << 26).register(router)
    protocol = HttpProtocol(router, set(), max_input_size=1 << 26)
    transport = _Transport()
    protocol.connection_made(transport)  # type: ignore[arg-type]
    raw = _request_bytes()
    for _ in range(1000):  # warm caches
        protocol.data_received(raw)
        await asyncio.sleep(0)
    profiler = cProfile.Profile() if profile else None
    if profiler is not None:
        profiler.enable()
    start = time.process_time()
    for _ in range(requests):
        protocol.data_received(raw)
        await asyncio.sleep(0)
    spent = time.process_time() - start
    if profiler is not None:
        profiler.disable()
        pstats.Stats(profiler).sort_stats("tottime").print_stats(25)
    for _ in range(3):
        await asyncio.sleep(0)
    if transport.ok != transport.writes or transport.writes != requests + 1000:
        raise SystemExit(f"only {transport.ok} of {transport.writes} answers were 200 OK")
    print(f"{spent / requests * 1e6:.1f} µs CPU per request ({requests} requests)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=20000)
    parser.add_argument("--profile", action="store_true", help="print a cProfile summary")
    parser.add_argument(
        "--cached", action="store_true", help="add_sub with the response cache: every request hits"
    )
    args = parser.parse_args()
    uvloop.run(_run(args.requests, args.profile, args.cached))


if __name__ == "__main__":
    main()
