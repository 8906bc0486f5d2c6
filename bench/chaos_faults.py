"""The chaos tool's faults, run one after another on a fixed rotation: ``kill -9`` of a worker
(a child process of the server), a model reloaded, a model unloaded and loaded again, a burst
past a queue limit, a client that walks away mid-request or mid-stream, a deadline that
expires. Each fault is logged with its time and what it hit.
"""

from __future__ import annotations

import http.client
import os
import random
import signal
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from bench.chaos_ledger import Ledger
from bench.chaos_load import GrpcUnary, deadline_call, http_disconnect, stream_cancel

ROTATION = (
    "kill",
    "http_disconnect",
    "burst",
    "reload",
    "stream_cancel",
    "deadline",
    "kill",
    "unload_load",
    "http_disconnect",
    "burst",
    "stream_cancel",
    "deadline",
)
#: Faults that replace worker processes (left out of a soak unless asked for).
PROCESS_FAULTS = frozenset({"kill", "reload", "unload_load"})
RELOADED = ("chaos_echo", "chaos_seq", "chaos_stream")
UNLOADED = ("chaos_step", "chaos_queue")


def children(pid: int) -> list[int]:
    """The direct child processes of ``pid`` (the server's instance workers)."""
    found: list[int] = []
    for task in Path(f"/proc/{pid}/task").glob("*/children"):
        try:
            found += [int(p) for p in task.read_text().split()]
        except OSError:
            pass
    return sorted(set(found))


@dataclass
class Faults:
    host: str
    port: int
    grpc_url: str
    server_pid: int
    ledger: Ledger
    kinds: tuple[str, ...] = ROTATION
    done: Counter[str] = field(default_factory=Counter)
    log: list[str] = field(default_factory=list)
    began: float = field(default_factory=time.monotonic)
    _unary: GrpcUnary | None = None

    def run_one(self, index: int) -> None:
        kind = self.kinds[index % len(self.kinds)]
        action: Callable[[], str] = getattr(self, f"_{kind}")
        try:
            what = action()
        except Exception as exc:  # noqa: BLE001 - a fault that fails is reported, not fatal
            what = f"failed: {exc!r}"
        self.done[kind] += 1
        self.log.append(f"{time.monotonic() - self.began:7.2f}s {kind}: {what}")

    def close(self) -> None:
        if self._unary is not None:
            self._unary.close()

    @property
    def unary(self) -> GrpcUnary:
        if self._unary is None:
            self._unary = GrpcUnary(self.grpc_url, self.ledger)
        return self._unary

    # -- the faults -----------------------------------------------------------------

    def _kill(self) -> str:
        workers = children(self.server_pid)
        if not workers:
            return "no worker to kill"
        pid = random.choice(workers)
        os.kill(pid, signal.SIGKILL)
        return f"SIGKILL worker pid {pid} (of {len(workers)})"

    def _reload(self) -> str:
        model = random.choice(RELOADED)
        return f"{model}: {self.repository(model, 'load')}"

    def _unload_load(self) -> str:
        model = random.choice(UNLOADED)
        first = self.repository(model, "unload")
        time.sleep(1.0)
        return f"{model}: unload {first}, load {self.repository(model, 'load')}"

    def _burst(self) -> str:
        self.unary.burst("chaos_queue", 24, 30)
        return "24 requests at once to chaos_queue (max_queue_size 4)"

    def _http_disconnect(self) -> str:
        http_disconnect(self.host, self.port, self.ledger, "chaos_echo", 300)
        return "HTTP client left mid-request"

    def _stream_cancel(self) -> str:
        stream_cancel(self.grpc_url, self.ledger)
        return "gRPC stream closed after 3 of 200 responses"

    def _deadline(self) -> str:
        deadline_call(self.unary, random.choice(("chaos_echo", "chaos_ens")))
        return "gRPC deadline 100 ms on 300 ms of work"

    def repository(self, model: str, op: str) -> int:
        conn = http.client.HTTPConnection(self.host, self.port, timeout=60)
        try:
            conn.request("POST", f"/v2/repository/models/{model}/{op}", b"")
            reply = conn.getresponse()
            reply.read()
            return reply.status
        finally:
            conn.close()
