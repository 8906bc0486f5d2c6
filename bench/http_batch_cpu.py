"""Main-process CPU per request of batched HTTP infer traffic, in process, without sockets.

What ``wrk -c64`` posting a JSON identity request (``--json``, the default) or
``perf_analyzer -m identity --shape INPUT0:16 --concurrency-range 64:64`` with binary tensors
(``--binary``) makes the server do, minus the sockets: the real ``identity`` model of
``bench/model_repository`` is loaded by the service's model manager (its dynamic batcher, its
instance, a real worker process), and 64 connections each keep one request outstanding.
Whenever the server writes a connection's response, that connection's next request is fed on
a later loop turn; what became due in one turn is fed in that turn, as readable sockets are
served by one pass of the event loop. The number printed is this process's CPU only (valgrind,
which does not follow the worker, counts the main process alone).

As in ``batch_stream_cpu.py`` the batcher's clock stands still while one turn's requests are
fed, so every turn of 64 requests is one full batch however fast the machine or valgrind runs,
and instructions per request are repeatable:

    .venv/bin/python bench/http_batch_cpu.py [--binary] [--requests N] [--profile]
    PYTHONHASHSEED=0 valgrind --tool=callgrind --callgrind-out-file=/dev/null \
        .venv/bin/python bench/http_batch_cpu.py --requests 1000    # then 3000: Δ/2000
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
from functools import partial
from pathlib import Path

# See batch_stream_cpu.py: no spinning OpenBLAS threads under valgrind.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

# Run as a script, bench/ itself is on sys.path; shared pieces are imported as `bench.*`.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np  # noqa: E402

from bench.closed_loop import (  # noqa: E402
    MODEL,
    WARMUP,
    ReadClock,
    batcher_on_read_clock,
    measured,
    run_with_model,
    wait_answered,
)
from tritium.frontends.http.handlers import KServeRoutes  # noqa: E402
from tritium.frontends.http.protocol import HttpProtocol  # noqa: E402
from tritium.frontends.http.router import Router  # noqa: E402
from tritium.service import ModelManager, Service  # noqa: E402

CONNECTIONS = 64
INPUT = np.arange(16, dtype=np.float32)
MAX_INPUT = 1 << 26


def json_request() -> bytes:
    """wrk's request: the bench's JSON body with wrk's headers."""
    body = json.dumps(
        {
            "inputs": [
                {"name": "INPUT0", "datatype": "FP32", "shape": [1, 16], "data": INPUT.tolist()}
            ]
        }
    ).encode()
    return (
        b"POST /v2/models/identity/infer HTTP/1.1\r\nHost: 127.0.0.1:8000\r\n"
        b"Content-Length: %d\r\nContent-Type: application/json\r\n\r\n" % len(body)
    ) + body


def binary_request() -> bytes:
    """perf_analyzer's request: a JSON header naming a binary input and output, then data."""
    header = json.dumps(
        {
            "inputs": [
                {
                    "name": "INPUT0",
                    "shape": [1, 16],
                    "datatype": "FP32",
                    "parameters": {"binary_data_size": INPUT.nbytes},
                }
            ],
            "outputs": [{"name": "OUTPUT0", "parameters": {"binary_data": True}}],
        },
        separators=(",", ":"),
    ).encode()
    body = header + INPUT.tobytes()
    return (
        b"POST /v2/models/identity/infer HTTP/1.1\r\nHost: 127.0.0.1:8000\r\n"
        b"Content-Type: application/octet-stream\r\nAccept: */*\r\n"
        b"Inference-Header-Content-Length: %d\r\nContent-Length: %d\r\n\r\n"
        % (len(header), len(body))
    ) + body


class _Connection:
    """One client connection: the transport its protocol writes to."""

    def __init__(self, clients: _Clients) -> None:
        self.clients = clients
        self.protocol: HttpProtocol | None = None
        self.last = b""

    def write(self, data: bytes) -> None:
        self.last = data
        clients = self.clients
        if not data.startswith(b"HTTP/1.1 200 "):
            clients.fail(f"the server answered {bytes(data[:300])!r}")
        clients.answered(self)

    def is_closing(self) -> bool:
        return False

    def get_extra_info(self, *args: object) -> None:
        return None

    def pause_reading(self) -> None: ...

    def resume_reading(self) -> None: ...

    def close(self) -> None:
        self.clients.fail("the server closed a connection")

    def abort(self) -> None:
        self.clients.fail("the server aborted a connection")


class _Clients:
    """Keep-alive clients (64 by default), one request outstanding on each."""

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        clock: ReadClock | None,
        request: bytes,
        connections: int,
    ):
        self.loop = loop
        self.count = connections
        self.clock = clock
        self.request = request
        self.connections: list[_Connection] = []
        self.due: list[_Connection] = []
        self.turn_scheduled = False
        self.budget = 0
        self.outstanding = 0
        self.responses = 0
        self.done: asyncio.Future | None = None

    def open(self, routes: Router) -> None:
        for _ in range(self.count):
            conn = _Connection(self)
            conn.protocol = HttpProtocol(routes, set(), max_input_size=MAX_INPUT)
            conn.protocol.connection_made(conn)  # type: ignore[arg-type]
            self.connections.append(conn)

    def fail(self, message: str) -> None:
        if self.done is not None and not self.done.done():
            self.done.set_exception(SystemExit(message))

    def answered(self, conn: _Connection) -> None:
        self.responses += 1
        self.outstanding -= 1
        self.due.append(conn)
        if not self.turn_scheduled:
            self.turn_scheduled = True
            self.loop.call_soon(self._turn)

    def _turn(self) -> None:
        self.turn_scheduled = False
        due = self.due
        self.due = []
        clock = self.clock
        if clock is not None:
            clock.frozen = time.monotonic_ns()
        try:
            for conn in due:
                if self.budget:
                    self.budget -= 1
                    self.outstanding += 1
                    conn.protocol.data_received(self.request)  # type: ignore[union-attr]
        except Exception as exc:  # noqa: BLE001 - reported by run(), not lost in the loop
            self.fail(f"the server raised {exc!r}")
            return
        finally:
            if clock is not None:
                clock.frozen = None
        if not self.budget and not self.outstanding and self.done is not None:
            if not self.done.done():
                self.done.set_result(None)

    async def run(self, requests: int) -> None:
        self.done = self.loop.create_future()
        self.budget = requests
        self.due.extend(self.connections)
        if not self.turn_scheduled:
            self.turn_scheduled = True
            self.loop.call_soon(self._turn)
        await wait_answered(self.done, lambda: self.responses)

    def check_replies(self, binary: bool) -> None:
        """Every connection's last answer echoes the input."""
        for conn in self.connections:
            head, _, body = bytes(conn.last).partition(b"\r\n\r\n")
            if binary:
                ok = body.endswith(INPUT.tobytes())
            else:
                outputs = json.loads(body)["outputs"]
                ok = outputs[0]["data"] == INPUT.tolist() and outputs[0]["shape"] == [1, 16]
            if not ok:
                raise SystemExit(f"bad answer: {head!r} {body[:300]!r}")


async def _measure(
    requests: int,
    binary: bool,
    profile: bool,
    connections: int,
    manager: ModelManager,
    service: Service,
) -> None:
    loaded = manager.table.get(MODEL)
    clock = batcher_on_read_clock(manager)
    router = Router()
    KServeRoutes(service, MAX_INPUT).register(router)
    clients = _Clients(
        asyncio.get_running_loop(),
        clock,
        binary_request() if binary else json_request(),
        connections,
    )
    clients.open(router)
    try:
        await clients.run(WARMUP)
        clients.check_replies(binary)
        before = loaded.scheduler.statistics()
        spent = await measured(clients.run(requests), profile)
        after = loaded.scheduler.statistics()
    finally:
        for conn in clients.connections:
            conn.protocol.connection_lost(None)  # type: ignore[union-attr]
    clients.check_replies(binary)
    batches = after.executions - before.executions
    rows = after.inferences - before.inferences
    if rows != requests:
        raise SystemExit(f"{rows} of {requests} requests ran")
    print(
        f"{spent / requests * 1e6:.1f} µs CPU per {'binary' if binary else 'JSON'} request "
        f"({requests} requests, {batches} batches, mean batch size {rows / max(batches, 1):.1f})"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=20000)
    parser.add_argument("--binary", action="store_true", help="binary tensors, not JSON")
    parser.add_argument("--profile", action="store_true", help="print a cProfile summary")
    parser.add_argument(
        "--connections",
        type=int,
        default=CONNECTIONS,
        help="clients, one request outstanding each: the batch size (at most 64)",
    )
    args = parser.parse_args()
    if not 1 <= args.connections <= CONNECTIONS:
        parser.error(f"--connections must be between 1 and {CONNECTIONS}")
    if args.requests < 1:
        parser.error("--requests must be at least 1")
    run_with_model(partial(_measure, args.requests, args.binary, args.profile, args.connections))


if __name__ == "__main__":
    main()
