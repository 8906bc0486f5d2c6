"""Server CPU per inference: CPU seconds the server's processes spent, over requests served.

Throughput on a shared 2-core machine drifts with the neighbours; the CPU a server spends per
request drifts much less, and it is what decides throughput once the machine is full. Both
servers are sampled the same way: the sum of user + system time of every process in the
server's process group (main process and model workers / Python stubs), read from /proc,
before and after a load-generator run, divided by the number of successful requests the
server itself counted (its statistics extension), so warm-up and measurement windows are
all included on both sides.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from bench.servers import group_pids, http_get

_TICKS = os.sysconf("SC_CLK_TCK")


def group_cpu_seconds(pgid: int) -> float:
    """User + system CPU seconds of the live processes in group `pgid` (children included)."""
    total = 0
    for pid in group_pids(pgid):
        try:
            fields = (Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        # utime, stime, cutime, cstime: fields 14-17 of proc(5), 12-15 after the comm.
        total += sum(int(v) for v in fields[11:15])
    return total / _TICKS


def success_count(url: str, model: str) -> int | None:
    """Successful requests `model` has served, from the statistics extension (None: unknown)."""
    try:
        status, body = http_get(f"http://{url}/v2/models/{model}/stats")
        if status != 200:
            return None
        stats = json.loads(body)["model_stats"]
        return sum(int(s["inference_stats"]["success"]["count"]) for s in stats)
    except (OSError, ValueError, KeyError, TypeError):
        return None


@dataclass(frozen=True)
class CpuSample:
    cpu_s: float
    requests: int | None


def sample(pgid: int | None, url: str, model: str) -> CpuSample | None:
    if pgid is None:
        return None
    return CpuSample(group_cpu_seconds(pgid), success_count(url, model))


def cpu_us_per_request(before: CpuSample | None, after: CpuSample | None) -> float | None:
    """Server CPU µs per successful request between two samples (None when not measurable)."""
    if before is None or after is None or before.requests is None or after.requests is None:
        return None
    served = after.requests - before.requests
    if served <= 0:
        return None
    return (after.cpu_s - before.cpu_s) / served * 1e6
