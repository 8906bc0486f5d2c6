"""Server CPU per inference: CPU seconds the server's processes spent, over requests served.

Throughput on a shared 2-core machine drifts with the neighbours; the CPU a server spends per
request drifts much less, and it is what decides throughput once the machine is full. Both
servers are sampled the same way: the sum of user + system time of every process in the
server's process group (main process and model workers / Python stubs), read from /proc,
before and after a load-generator run, divided by the number of successful requests the
server itself counted (its statistics extension), so warm-up and measurement windows are
all included on both sides. The same statistics give the mean batch size over the span
(rows run over model executions), which tells how each server's batcher merged requests.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.servers import group_pids, http_get

_TICKS = os.sysconf("SC_CLK_TCK")


def _cpu_ticks(pid: int, *, reaped_children: bool) -> int:
    """utime + stime of `pid` (and cutime + cstime, its reaped children's, if asked); 0 when
    it is gone."""
    try:
        fields = (Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return 0
    # utime, stime, cutime, cstime: fields 14-17 of proc(5), 12-15 after the comm.
    return sum(int(v) for v in fields[11 : 15 if reaped_children else 13])


def group_cpu_seconds(pgid: int) -> float:
    """User + system CPU seconds of the live processes in group `pgid` (children included)."""
    return sum(_cpu_ticks(pid, reaped_children=True) for pid in group_pids(pgid)) / _TICKS


def main_cpu_seconds(pgid: int) -> float:
    """User + system CPU seconds of the group's leader alone: the server's main process
    (tritium's event loop, tritonserver itself), without its workers or stubs."""
    return _cpu_ticks(pgid, reaped_children=False) / _TICKS


@dataclass(frozen=True)
class ModelCounts:
    """Counters of one model from its statistics, summed over versions (None: not reported)."""

    requests: int | None  # successful requests (inference_stats.success.count)
    inferences: int | None  # rows run (inference_count)
    executions: int | None  # model executions, i.e. batches (execution_count)


_UNKNOWN = ModelCounts(None, None, None)


def parse_counts(body: bytes) -> ModelCounts:
    """The counters in a statistics-extension answer; a field either server omits is None."""
    try:
        stats = json.loads(body)["model_stats"]
    except (ValueError, KeyError, TypeError):
        return _UNKNOWN

    def total(field: Callable[[dict[str, Any]], Any]) -> int | None:
        try:
            return sum(int(field(s)) for s in stats)
        except (ValueError, KeyError, TypeError):
            return None

    return ModelCounts(
        requests=total(lambda s: s["inference_stats"]["success"]["count"]),
        inferences=total(lambda s: s["inference_count"]),
        executions=total(lambda s: s["execution_count"]),
    )


def model_counts(url: str, model: str) -> ModelCounts:
    """`model`'s counters from one `GET /v2/models/<model>/stats` (all None when it fails)."""
    status, body = http_get(f"http://{url}/v2/models/{model}/stats")
    return parse_counts(body) if status == 200 else _UNKNOWN


@dataclass(frozen=True)
class CpuSample:
    """A server process group's CPU time and one model's counters at one moment."""

    cpu_s: float
    requests: int | None
    inferences: int | None = None
    executions: int | None = None
    main_cpu_s: float | None = None  # the main process's share of cpu_s


def sample(pgid: int | None, url: str, model: str) -> CpuSample | None:
    """The server group's CPU time and `model`'s counters now (None without a process group)."""
    if pgid is None:
        return None
    cpu_s = group_cpu_seconds(pgid)
    main_s = main_cpu_seconds(pgid)
    counts = model_counts(url, model)
    return CpuSample(cpu_s, counts.requests, counts.inferences, counts.executions, main_s)


def cpu_us_per_request(before: CpuSample | None, after: CpuSample | None) -> float | None:
    """Server CPU µs per successful request between two samples (None when not measurable)."""
    if before is None or after is None:
        return None
    return _us_per_request(before, after, before.cpu_s, after.cpu_s)


def main_cpu_us_per_request(before: CpuSample | None, after: CpuSample | None) -> float | None:
    """The main process's CPU µs per successful request between two samples (None when not
    measurable): what is left of `cpu_us_per_request` is the workers' (stubs')."""
    if before is None or after is None or before.main_cpu_s is None or after.main_cpu_s is None:
        return None
    return _us_per_request(before, after, before.main_cpu_s, after.main_cpu_s)


def _us_per_request(
    before: CpuSample, after: CpuSample, cpu_before: float, cpu_after: float
) -> float | None:
    if before.requests is None or after.requests is None:
        return None
    served = after.requests - before.requests
    if served <= 0:
        return None
    return (cpu_after - cpu_before) / served * 1e6


def mean_batch_size(before: CpuSample | None, after: CpuSample | None) -> float | None:
    """Rows per model execution between two samples (None when not measurable)."""
    if before is None or after is None:
        return None
    rows = _grown(before.inferences, after.inferences)
    executions = _grown(before.executions, after.executions)
    # Counters that went back mean the server restarted in between: nothing to compare.
    if rows is None or executions is None or rows < 0 or executions <= 0:
        return None
    return rows / executions


def _grown(before: int | None, after: int | None) -> int | None:
    return None if before is None or after is None else after - before
