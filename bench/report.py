"""Aggregate the interleaved runs (median per server) into ratios — tritium/Triton, and a
scenario against its baseline scenario — and write them as JSON and Markdown."""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field
from typing import Any

from bench.measurement import Measurement, paired_throughputs
from bench.scenarios import Scenario

SERVERS = ("tritium", "triton")
SUBJECT, BASELINE = SERVERS
_LABELS = {"tritium": "tritium", "triton": "Triton"}


@dataclass(frozen=True)
class ServerSummary:
    """Medians over the successful rounds of one server in one scenario."""

    runs: int
    failed: int
    throughput: float | None
    p50_us: float | None
    p99_us: float | None
    server_cpu_us: float | None = None
    mean_batch_size: float | None = None
    server_main_cpu_us: float | None = None


def summarize(measurements: list[Measurement]) -> ServerSummary:
    """Medians (each taken on its own) of throughput, p50, p99, server CPU per request and
    mean batch size over the runs that succeeded."""
    good = [m for m in measurements if m.ok]

    def median(values: list[float | None]) -> float | None:
        present = [v for v in values if v is not None]
        return statistics.median(present) if present else None

    return ServerSummary(
        runs=len(measurements),
        failed=len(measurements) - len(good),
        throughput=median([m.throughput for m in good]),
        p50_us=median([m.p50_us for m in good]),
        p99_us=median([m.p99_us for m in good]),
        server_cpu_us=median([m.server_cpu_us for m in good]),
        mean_batch_size=median([m.mean_batch_size for m in good]),
        server_main_cpu_us=median([m.server_main_cpu_us for m in good]),
    )


def ratio(numerator: float | None, denominator: float | None) -> float | None:
    if numerator is None or not denominator:
        return None
    return numerator / denominator


@dataclass
class ScenarioResult:
    """All rounds of one scenario: `runs[server][i]` is that server's run in round i + 1."""

    scenario: Scenario
    runs: dict[str, list[Measurement]] = field(default_factory=lambda: {s: [] for s in SERVERS})
    skipped: str | None = None

    def summary(self, server: str) -> ServerSummary:
        return summarize(self.runs[server])

    @property
    def throughput_ratio(self) -> float | None:
        """tritium / Triton median throughput (higher is better for tritium)."""
        return ratio(self.summary(SUBJECT).throughput, self.summary(BASELINE).throughput)

    @property
    def p99_ratio(self) -> float | None:
        """tritium / Triton median p99 latency (lower is better for tritium)."""
        return ratio(self.summary(SUBJECT).p99_us, self.summary(BASELINE).p99_us)

    @property
    def cpu_ratio(self) -> float | None:
        """tritium / Triton median server CPU per request (lower is better for tritium)."""
        return ratio(self.summary(SUBJECT).server_cpu_us, self.summary(BASELINE).server_cpu_us)

    @property
    def acceptance(self) -> str:
        """'pass' / 'FAIL' for acceptance scenarios (tritium ≥ 1.0× Triton), else ''."""
        if not self.scenario.acceptance:
            return ""
        r = self.throughput_ratio
        return "pass" if r is not None and r >= 1.0 else "FAIL"

    def errors(self) -> list[tuple[str, int, str]]:
        """(server, round, error) of every failed run."""
        return [
            (server, i + 1, m.error)
            for server in SERVERS
            for i, m in enumerate(self.runs[server])
            if m.error is not None
        ]

    def to_json(self) -> dict[str, Any]:
        return {
            "scenario": self.scenario.name,
            "model": self.scenario.model,
            "tool": self.scenario.tool,
            "concurrency": self.scenario.concurrency,
            "description": self.scenario.description,
            "acceptance": self.acceptance or None,
            "skipped": self.skipped,
            "throughput_ratio": self.throughput_ratio,
            "p99_ratio": self.p99_ratio,
            "server_cpu_ratio": self.cpu_ratio,
            "median": {s: vars(self.summary(s)) for s in SERVERS},
            "runs": {s: [m.to_json() for m in self.runs[s]] for s in SERVERS},
        }


# Two-sided 95% quantiles of Student's t for 1..30 degrees of freedom; beyond, the normal's.
_T95 = (
    12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
    2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
    2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042,
)  # fmt: skip

# A baseline check passes when its interval reaches 1.0 and starts above this: the run
# saw no fall, and could have seen one of 10%.
RESOLVED_FALL = 0.9


@dataclass(frozen=True)
class PairedRatio:
    """Per-round ratios of a scenario's throughput over its baseline's, same server and
    round, summarized: drift between rounds cancels in each pair."""

    estimate: float  # geometric mean of the per-round ratios
    low: float | None  # 95% confidence interval of that mean (None from a single round)
    high: float | None
    rounds: int

    def verdict(self) -> str:
        """'pass' (no fall seen, and one of 10% would have been), 'FAIL' (a fall is
        significant) or 'inconclusive' (too noisy to rule a 10% fall out)."""
        if self.high is None or self.low is None:
            return "inconclusive"
        if self.high < 1.0:
            return "FAIL"
        return "pass" if self.low >= RESOLVED_FALL else "inconclusive"

    def text(self) -> str:
        if self.low is None or self.high is None:
            return f"paired {self.estimate:.2f}×, 1 round"
        return (
            f"paired {self.estimate:.2f}×, 95% CI {self.low:.2f}–{self.high:.2f}, "
            f"{self.rounds} rounds"
        )


def paired_ratio(runs: list[Measurement], baseline_runs: list[Measurement]) -> PairedRatio | None:
    """The per-round throughput ratios of `runs` over `baseline_runs` (rounds where either
    failed are left out) as a geometric mean with a t interval on their logarithms."""
    logs = [math.log(m / b) for m, b in paired_throughputs(runs, baseline_runs)]
    if not logs:
        return None
    mean = statistics.fmean(logs)
    if len(logs) == 1:
        return PairedRatio(math.exp(mean), None, None, 1)
    df = len(logs) - 1
    t = _T95[df - 1] if df <= len(_T95) else 1.96
    half = t * statistics.stdev(logs) / math.sqrt(len(logs))
    return PairedRatio(math.exp(mean), math.exp(mean - half), math.exp(mean + half), len(logs))


@dataclass(frozen=True)
class BaselineRatios:
    """One server's throughput in a scenario over its throughput in the baseline scenario."""

    median_ratio: float | None  # ratio of the medians over rounds
    paired: PairedRatio | None  # the rounds paired

    def to_json(self) -> dict[str, Any]:
        return {
            "median_ratio": self.median_ratio,
            "paired": vars(self.paired) if self.paired else None,
        }

    def text(self) -> str:
        paired = self.paired.text() if self.paired else "paired —"
        return f"{_ratio(self.median_ratio)} ({paired})"


@dataclass(frozen=True)
class BaselineComparison:
    """A scenario against the scenario it names as its baseline, measured in the same run."""

    scenario: str
    baseline: str
    servers: dict[str, BaselineRatios]
    checked: bool = False  # the scenario must not fall below its baseline (tritium's check)

    @property
    def verdict(self) -> str | None:
        if not self.checked:
            return None
        paired = self.servers[SUBJECT].paired
        return paired.verdict() if paired else "inconclusive"

    def to_json(self) -> dict[str, Any]:
        return {
            "scenario": self.baseline,
            "check": self.verdict,
            **{s: r.to_json() for s, r in self.servers.items()},
        }

    def line(self) -> str:
        """e.g. "`a` vs `b`: tritium 0.98× (paired 1.01×, 95% CI 0.97–1.05, 16 rounds),
        Triton 1.05× (…); not below the baseline: pass"."""
        parts = [f"{_LABELS[s]} {r.text()}" for s, r in self.servers.items()]
        line = f"`{self.scenario}` vs `{self.baseline}`: {', '.join(parts)}"
        if self.verdict is not None:
            line += f"; tritium not below the baseline: {self.verdict}"
        return line


def compare_to_baseline(
    result: ScenarioResult, results: list[ScenarioResult]
) -> BaselineComparison | None:
    """`result` against its baseline scenario; None when it has none or it is not in `results`."""
    name = result.scenario.baseline
    base = next((r for r in results if r.scenario.name == name), None) if name else None
    if base is None:
        return None
    return BaselineComparison(
        scenario=result.scenario.name,
        baseline=base.scenario.name,
        servers={
            s: BaselineRatios(
                median_ratio=ratio(result.summary(s).throughput, base.summary(s).throughput),
                paired=paired_ratio(result.runs[s], base.runs[s]),
            )
            for s in SERVERS
        },
        checked=result.scenario.check_baseline,
    )


def baseline_lines(results: list[ScenarioResult]) -> list[str]:
    """One line per scenario whose baseline scenario is in the run."""
    comparisons = (compare_to_baseline(r, results) for r in results)
    return [c.line() for c in comparisons if c is not None]


def report_json(meta: dict[str, Any], results: list[ScenarioResult]) -> dict[str, Any]:
    scenarios = []
    for r in results:
        comparison = compare_to_baseline(r, results)
        baseline = comparison.to_json() if comparison else None
        scenarios.append({**r.to_json(), "baseline": baseline})
    return {**meta, "scenarios": scenarios}


def _num(value: float | None) -> str:
    return "—" if value is None else f"{value:,.0f}"


def _ratio(value: float | None) -> str:
    return "—" if value is None else f"{value:.2f}×"


def _batch(value: float | None) -> str:
    return "—" if value is None else f"{value:.1f}"


def markdown_table(results: list[ScenarioResult]) -> str:
    """The results table: medians per server, ratios tritium/Triton, acceptance check."""
    lines = [
        "| scenario | tritium infer/s | Triton infer/s | throughput tritium/Triton "
        "| tritium p50 µs | Triton p50 µs | tritium p99 µs | Triton p99 µs "
        "| p99 tritium/Triton | tritium CPU µs/infer | Triton CPU µs/infer "
        "| CPU tritium/Triton | mean batch tritium / Triton | check |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for r in results:
        if r.skipped:
            lines.append(f"| `{r.scenario.name}` | skipped: {r.skipped} |||||||||||||")
            continue
        t, b = r.summary(SUBJECT), r.summary(BASELINE)

        def ok_count(s: ServerSummary) -> str:
            return f" ({s.runs - s.failed}/{s.runs} ok)" if s.failed else ""

        lines.append(
            f"| `{r.scenario.name}` | {_num(t.throughput)}{ok_count(t)} "
            f"| {_num(b.throughput)}{ok_count(b)} | {_ratio(r.throughput_ratio)} "
            f"| {_num(t.p50_us)} | {_num(b.p50_us)} | {_num(t.p99_us)} | {_num(b.p99_us)} "
            f"| {_ratio(r.p99_ratio)} | {_num(t.server_cpu_us)} | {_num(b.server_cpu_us)} "
            f"| {_ratio(r.cpu_ratio)} | {_batch(t.mean_batch_size)} / {_batch(b.mean_batch_size)} "
            f"| {r.acceptance} |"
        )
    return "\n".join(lines)


def markdown_report(meta: dict[str, Any], results: list[ScenarioResult]) -> str:
    """A complete Markdown page: run metadata, the table and every error seen."""
    out = [
        f"# tritium vs Triton — {meta['timestamp']}",
        "",
        f"- commit: `{meta['commit']}`",
        f"- machine: {meta['machine']}",
        f"- scheduling: {meta.get('scheduling', 'not recorded')}",
        f"- servers: {meta['servers']}",
        f"- rounds: {meta['rounds']} (each round runs every scenario, tritium then Triton; a "
        "scenario and its baseline back to back on each server); medians per server",
        f"- setup: {meta['setup']}",
        f"- load average (1/5/15 min) at start {meta.get('load_average_start')}, "
        f"at end {meta.get('load_average_end')}",
        "",
        markdown_table(results),
    ]
    against = baseline_lines(results)
    if against:
        out += ["", "## Against a baseline scenario", ""]
        out += [
            "Throughput of each server in the scenario over its throughput in the baseline "
            "scenario: the ratio of the medians, and (paired) the geometric mean of the "
            "per-round ratios with its 95% confidence interval; each server runs the pair back "
            "to back, in alternating order, so the machine's drift does not bias the pairs. "
            f"A checked scenario passes when the interval reaches 1.0 and starts at or above "
            f"{RESOLVED_FALL:.2f} (no fall seen, and a 10% fall would have been).",
            "",
        ]
        out += [f"- {line}" for line in against]
    if meta.get("interrupted"):
        out[2:2] = ["**Interrupted: partial results.**", ""]
    errors = [(r.scenario.name, *e) for r in results for e in r.errors()]
    if errors:
        out += ["", "## Errors", ""]
        out += [f"- `{name}` {server} round {rnd}: {err}" for name, server, rnd, err in errors]
    notes = [
        (r.scenario.name, server, note)
        for r in results
        for server in SERVERS
        for note in dict.fromkeys(n for m in r.runs[server] for n in m.notes)
    ]
    if notes:
        out += ["", "## Tool warnings", ""]
        out += [f"- `{name}` {server}: {note}" for name, server, note in notes]
    return "\n".join(out) + "\n"
