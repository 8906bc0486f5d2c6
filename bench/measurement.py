"""One load-generator run against one server: throughput, latency percentiles or an error."""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from typing import Any

_PROBLEM = re.compile(r"error|fail|unable|invalid|unexpected|warning", re.IGNORECASE)


@dataclass(frozen=True)
class Measurement:
    """Result of one run; `error` is set (and the numbers are None) when the run failed."""

    throughput: float | None = None  # inferences per second
    p50_us: float | None = None
    p99_us: float | None = None
    # Server CPU (all its processes) per successful request over the whole run.
    server_cpu_us: float | None = None
    # The server's main process alone (the rest is its workers or stubs), same span.
    server_main_cpu_us: float | None = None
    # Rows per model execution (the batches the server formed) over the same span.
    mean_batch_size: float | None = None
    error: str | None = None
    # Problem lines the tool printed even though it produced numbers (e.g. warnings).
    notes: tuple[str, ...] = ()
    command: tuple[str, ...] = field(default=(), compare=False)

    @property
    def ok(self) -> bool:
        return self.error is None and self.throughput is not None

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["command"] = list(self.command)
        data["notes"] = list(self.notes)
        return data


def paired_throughputs(
    runs: list[Measurement], baseline_runs: list[Measurement], *, strict: bool = False
) -> list[tuple[float, float]]:
    """(throughput, baseline throughput) of each round, the rounds where either run failed
    left out so that the others stay paired with their own round. Rounds past the shorter
    list (an interrupted run) are unpaired; with ``strict`` unequal lists are a ValueError."""
    return [
        (m.throughput, b.throughput)
        for m, b in zip(runs, baseline_runs, strict=strict)
        if m.ok and b.ok and m.throughput and b.throughput
    ]


def problem_lines(output: str, limit: int = 8) -> tuple[str, ...]:
    """Distinct lines of a tool's output that report a problem, in order, at most `limit`."""
    seen: dict[str, None] = {}
    for line in output.splitlines():
        line = line.strip()
        if line and _PROBLEM.search(line) and line not in seen:
            seen[line] = None
            if len(seen) == limit:
                break
    return tuple(seen)


def failure_text(output: str, returncode: int, limit: int = 8) -> str:
    """A short description of a failed run: its problem lines, else the last output lines."""
    lines = problem_lines(output, limit)
    if not lines:
        lines = tuple(line for line in output.strip().splitlines()[-limit:] if line.strip())
    detail = " | ".join(lines) if lines else "no output"
    return f"exit code {returncode}: {detail}"
