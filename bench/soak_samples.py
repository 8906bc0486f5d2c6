"""Resource samples of a running server for the soak: resident memory of the server and of
each worker, open descriptors, threads, child processes and ``/dev/shm`` entries, read from
``/proc``; the verdict (a least-squares slope after warm-up, not one sample, decides
whether a series is flat) and the plot.

Flat means: the least-squares line through the samples after warm-up rises by at most
``BOUNDS[series]`` from the first of them to the last — server RSS 8 MiB, the workers' RSS
together 16 MiB, descriptors 4, threads 4, child processes 1, shared-memory mappings 2.
Counts step up and down with connections and restarts; one sample decides nothing, only
the trend does. The growth per hour is reported beside it.

``shm`` counts what the server and its workers map from ``/dev/shm`` or as memfd (the
server's arenas are memfd); entries other programs keep in ``/dev/shm`` do not count.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

from bench.chaos_faults import children

SERIES = ("server_rss_mib", "workers_rss_mib", "fds", "threads", "children", "shm")
#: How much the fitted line may rise over the run after warm-up, per series.
BOUNDS = {
    "server_rss_mib": 8.0,
    "workers_rss_mib": 16.0,
    "fds": 4.0,
    "threads": 4.0,
    "children": 1.0,
    "shm": 2.0,
}


@dataclass(frozen=True, slots=True)
class Sample:
    t: float  # seconds since the start of the run
    server_rss_mib: float
    workers_rss_mib: float
    fds: int  # server and workers together
    threads: int
    children: int
    shm: int  # /dev/shm files and memfds mapped by the server and its workers
    ok: int  # successful answers so far (throughput is its slope)
    server_cpu_s: float = 0.0  # CPU seconds the server process has used so far
    load: float = 0.0  # the machine's 1-minute load average
    client_cpu_s: float = 0.0  # CPU seconds the load generator (this process) has used so far


def _status(pid: int) -> dict[str, str]:
    out = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        out[key] = value.strip()
    return out


def _rss_mib(status: dict[str, str]) -> float:
    return int(status.get("VmRSS", "0 kB").split()[0]) / 1024


def _shared_mappings(pid: int) -> set[str]:
    found = set()
    for line in Path(f"/proc/{pid}/maps").read_text().splitlines():
        parts = line.split(maxsplit=5)
        if len(parts) == 6 and (parts[5].startswith(("/dev/shm/", "/memfd:"))):
            found.add(f"{pid}:{parts[4]}:{parts[5]}")  # one entry per file (by inode)
    return found


def sample(pid: int, began: float, ok: int) -> Sample:
    server = _status(pid)
    workers = children(pid)
    rss = 0.0
    fds = len(os.listdir(f"/proc/{pid}/fd"))
    threads = int(server["Threads"])
    shared = _shared_mappings(pid)
    for child in workers:
        try:
            status = _status(child)
            rss += _rss_mib(status)
            threads += int(status["Threads"])
            fds += len(os.listdir(f"/proc/{child}/fd"))
            shared |= _shared_mappings(child)
        except (OSError, KeyError):
            pass  # it exited between the listing and the read
    return Sample(
        t=time.monotonic() - began,
        server_rss_mib=_rss_mib(server),
        workers_rss_mib=rss,
        fds=fds,
        threads=threads,
        children=len(workers),
        shm=len(shared),
        ok=ok,
        server_cpu_s=_cpu_s(pid),
        load=float(Path("/proc/loadavg").read_text().split()[0]),
        client_cpu_s=time.process_time(),
    )


_TICKS = os.sysconf("SC_CLK_TCK")


def _cpu_s(pid: int) -> float:
    """User + system CPU seconds of ``pid`` (fields 14 and 15 of /proc/<pid>/stat)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _TICKS


def slope(xs: list[float], ys: list[float]) -> float:
    """Least-squares slope of ys over xs (0 with fewer than two points)."""
    n = len(xs)
    if n < 2:
        return 0.0
    mx, my = sum(xs) / n, sum(ys) / n
    var = sum((x - mx) ** 2 for x in xs)
    if var == 0:
        return 0.0
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / var


def verdict(samples: list[Sample], warmup_s: float) -> dict[str, dict[str, float | bool]]:
    """Per series after warm-up: the fitted line's rise over the run (and per hour), its
    bound, and whether the series is flat."""
    kept = [s for s in samples if s.t >= warmup_s]
    out: dict[str, dict[str, float | bool]] = {}
    for name in SERIES:
        xs = [s.t for s in kept]
        ys = [float(getattr(s, name)) for s in kept]
        fitted = slope(xs, ys)
        rise = fitted * (xs[-1] - xs[0]) if xs else 0.0
        out[name] = {
            "first": ys[0] if ys else 0.0,
            "last": ys[-1] if ys else 0.0,
            "rise": round(rise, 2),
            "bound": BOUNDS[name],
            "per_hour": round(fitted * 3600, 2),
            "flat": rise <= BOUNDS[name],
        }
    return out


def throughput(samples: list[Sample], warmup_s: float, window_s: float) -> dict[str, float]:
    """Successful answers per second in the first window after warm-up and in the last;
    also per CPU-second of the server process (what an answer costs the event loop, which
    other programs on a shared machine do not change) and the load average meanwhile."""
    kept = [s for s in samples if s.t >= warmup_s]
    out = {"start": 0.0, "end": 0.0, "start_per_cpu_s": 0.0, "end_per_cpu_s": 0.0}
    out |= {"start_per_client_cpu_s": 0.0, "end_per_client_cpu_s": 0.0}
    if len(kept) < 2:
        return out | {"start_load": 0.0, "end_load": 0.0}

    def rate(part: list[Sample]) -> tuple[float, float, float, float]:
        if len(part) < 2 or part[-1].t == part[0].t:
            return 0.0, 0.0, 0.0, 0.0
        answers = part[-1].ok - part[0].ok
        cpu = part[-1].server_cpu_s - part[0].server_cpu_s
        client = part[-1].client_cpu_s - part[0].client_cpu_s
        load = sum(s.load for s in part) / len(part)
        per_cpu = answers / cpu if cpu > 0 else 0.0
        per_client = answers / client if client > 0 else 0.0
        return answers / (part[-1].t - part[0].t), per_cpu, per_client, load

    start = [s for s in kept if s.t <= kept[0].t + window_s]
    end = [s for s in kept if s.t >= kept[-1].t - window_s]
    (a, a_cpu, a_client, a_load), (b, b_cpu, b_client, b_load) = rate(start), rate(end)
    return {
        "start": a,
        "end": b,
        "start_per_cpu_s": a_cpu,
        "end_per_cpu_s": b_cpu,
        "start_per_client_cpu_s": a_client,
        "end_per_client_cpu_s": b_client,
        "start_load": a_load,
        "end_load": b_load,
    }


def plot(samples: list[Sample], warmup_s: float, path: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ts = [s.t / 60 for s in samples]
    fig, axes = plt.subplots(4, 1, figsize=(9, 10), sharex=True)
    axes[0].plot(ts, [s.server_rss_mib for s in samples], label="server")
    axes[0].plot(ts, [s.workers_rss_mib for s in samples], label="workers (sum)")
    axes[0].set_ylabel("RSS MiB")
    axes[1].plot(ts, [s.fds for s in samples], label="open fds")
    axes[1].plot(ts, [s.threads for s in samples], label="threads")
    axes[1].set_ylabel("count")
    axes[2].plot(ts, [s.children for s in samples], label="child processes")
    axes[2].plot(ts, [s.shm for s in samples], label="shared mappings (/dev/shm, memfd)")
    axes[2].set_ylabel("count")
    rates = [0.0] + [
        (b.ok - a.ok) / (b.t - a.t) if b.t > a.t else 0.0
        for a, b in zip(samples, samples[1:], strict=False)
    ]
    axes[3].plot(ts, rates, label="answers/s")
    axes[3].set_ylabel("answers/s")
    axes[3].set_xlabel("minutes")
    for ax in axes:
        ax.axvline(warmup_s / 60, color="grey", linestyle=":", linewidth=1)
        ax.legend(loc="upper left", fontsize=8)
        ax.grid(alpha=0.3)
    axes[0].set_title(title)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
