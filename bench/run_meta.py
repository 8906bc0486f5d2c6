"""What a bench run records about itself: commit, machine, load, setup, servers."""

from __future__ import annotations

import contextlib
import os
import platform
import subprocess
from pathlib import Path

from bench.anchors import REPO_ROOT
from bench.scenarios import MeasureSettings
from bench.servers import Server, server_metadata
from tritium.frontends.metrics.system import cpu_jiffies


def load_average() -> list[float]:
    # Other work on these shared machines skews absolute numbers; the load shows how much.
    return [round(x, 2) for x in os.getloadavg()]


def session_weight() -> str:
    """The load generator's scheduling weight against the servers'. The servers start in
    sessions of their own, and where the kernel groups scheduling by session (autogroup)
    each session shares the CPU as one: a load generator run from a reniced session (``echo
    -19 > /proc/self/autogroup``) then outweighs each server's session (~70:1 at -19), which
    changes the absolute numbers and can change the ratios."""
    enabled: str | None = None
    group: str | None = None
    with contextlib.suppress(OSError):
        enabled = Path("/proc/sys/kernel/sched_autogroup_enabled").read_text()
        group = Path("/proc/self/autogroup").read_text()
    return describe_weight(os.nice(0), enabled, group)


def describe_weight(process_nice: int, autogroup_enabled: str | None, autogroup: str | None) -> str:
    """``autogroup`` is what ``/proc/self/autogroup`` reads ("/autogroup-N nice K"); containers
    may give an empty file, and then the weight is unknown."""
    process = f"process nice {process_nice}"
    if autogroup_enabled is None or autogroup is None:
        return f"{process}; autogroup unknown"
    if autogroup_enabled.strip() != "1":
        return f"{process}; autogroup scheduling off"
    words = autogroup.split()
    if len(words) < 3 or words[-2] != "nice":
        return f"{process}; autogroup unknown"
    return (
        f"{process}; load generator's session at autogroup nice {words[-1]}, "
        "the servers in sessions of their own at nice 0"
    )


def commit() -> str:
    def git(*args: str) -> str:
        return subprocess.run(
            ["git", "-C", str(REPO_ROOT), *args], capture_output=True, text=True, check=True
        ).stdout.strip()

    try:
        commit = git("rev-parse", "--short", "HEAD")
    except (OSError, subprocess.CalledProcessError):
        return "unknown (no commit)"
    try:
        dirty = bool(git("status", "--porcelain", "--untracked-files=no"))
    except (OSError, subprocess.CalledProcessError):
        dirty = False
    return commit + ("-dirty" if dirty else "")


def machine() -> str:
    cpu = "unknown CPU"
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    return (
        f"{os.cpu_count()} CPUs ({cpu}), {platform.system()} {platform.release()}, "
        f"Python {platform.python_version()}; both servers and the load generator share them"
    )


def describe_setup(s: MeasureSettings) -> str:
    return (
        f"perf_analyzer -i http --concurrency-range C:C "
        f"--measurement-interval={s.measurement_interval_ms} "
        f"--stability-percentage={s.stability_percentage} --max-trials={s.max_trials} "
        f"(throughput and p50/p99 from its -f CSV); wrk -t{s.wrk_threads} -c64 "
        f"-d{s.wrk_duration_s}s after a {s.wrk_warmup_s}s warm-up"
    )


def describe_servers(servers: dict[str, Server]) -> str:
    parts = []
    for name, server in servers.items():
        md = server_metadata(server.url)
        parts.append(f"{name} {md.get('version', '?')} at {server.url}")
    return ", ".join(parts)


def cpu_ticks() -> tuple[int, int] | None:
    """(stolen, all) clock ticks of the machine's CPUs so far (``/proc/stat``), None where
    unreadable. On a virtual machine "stolen" is time the hypervisor gave to others while
    this machine had work: a measurement that saw much of it ran on a busy host."""
    try:
        with open("/proc/stat") as stat:
            return parse_cpu_line(stat.readline())
    except OSError:
        return None


def parse_cpu_line(line: str) -> tuple[int, int] | None:
    """(stolen, all) from the aggregate ``cpu`` line of ``/proc/stat``; None for any other
    line, or one from a kernel that does not count steal time."""
    if len(line.split()) < 9:
        return None
    try:
        ticks = cpu_jiffies(line)
    except ValueError:
        return None
    return ticks[7], sum(ticks)


def stolen_share(before: tuple[int, int] | None, after: tuple[int, int] | None) -> float | None:
    """The share of CPU time stolen between two ``cpu_ticks`` readings."""
    if before is None or after is None or after[1] <= before[1]:
        return None
    return (after[0] - before[0]) / (after[1] - before[1])
