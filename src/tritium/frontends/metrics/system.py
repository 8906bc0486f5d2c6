"""CPU utilisation and memory from ``/proc`` (Linux), as Triton's CPU metrics read them.

Utilisation is the busy share of all cores between two samples (idle and iowait count as
idle); used memory is ``MemTotal - MemAvailable``. Parsing is separate from reading so
both are testable with fixed text.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True, slots=True)
class SystemSample:
    cpu_utilization: float = 0.0
    memory_total_bytes: int = 0
    memory_used_bytes: int = 0


def cpu_jiffies(stat_text: str) -> list[int]:
    """The aggregate ``cpu`` line of ``/proc/stat``: user, nice, system, idle, iowait, irq,
    softirq, steal (guest time is inside user; fields a kernel lacks are 0)."""
    for line in stat_text.splitlines():
        if line.startswith("cpu "):
            fields = [int(v) for v in line.split()[1:]]
            return (fields + [0] * 8)[:8]
    raise ValueError("no aggregate cpu line in /proc/stat")


def parse_cpu_times(stat_text: str) -> tuple[int, int]:
    """(busy, total) jiffies from the aggregate ``cpu`` line of ``/proc/stat``."""
    fields = cpu_jiffies(stat_text)
    idle = fields[3] + fields[4]
    total = sum(fields)
    return total - idle, total


def parse_meminfo(text: str) -> tuple[int, int]:
    """(total, used) bytes from ``/proc/meminfo``."""
    values = {}
    for line in text.splitlines():
        key, _, rest = line.partition(":")
        parts = rest.split()
        if parts:
            values[key] = int(parts[0]) * 1024  # reported in kB
    total = values.get("MemTotal", 0)
    available = values.get("MemAvailable", values.get("MemFree", 0))
    return total, max(0, total - available)


class SystemSampler:
    """Call ``sample()`` every ``--metrics-interval-ms``; ``latest`` is the last result."""

    def __init__(self, proc: Path = Path("/proc")) -> None:
        self._proc = proc
        self._last_cpu: tuple[int, int] | None = None
        self.latest = SystemSample()

    def sample(self) -> SystemSample:
        try:
            busy, total = parse_cpu_times((self._proc / "stat").read_text())
            mem_total, mem_used = parse_meminfo((self._proc / "meminfo").read_text())
        except (OSError, ValueError):
            return self.latest  # not Linux, or /proc unreadable: keep the last values
        utilization = self.latest.cpu_utilization
        if self._last_cpu is not None:
            d_busy, d_total = busy - self._last_cpu[0], total - self._last_cpu[1]
            if d_total > 0:
                utilization = min(1.0, max(0.0, d_busy / d_total))
        self._last_cpu = (busy, total)
        self.latest = SystemSample(utilization, mem_total, mem_used)
        return self.latest
