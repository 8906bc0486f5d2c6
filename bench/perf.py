"""Run the real perf_analyzer once against one server and read its CSV report."""

from __future__ import annotations

import csv
import subprocess
from pathlib import Path

from bench.measurement import Measurement, failure_text, problem_lines
from bench.scenarios import MeasureSettings, Scenario

# Column names of perf_analyzer's `-f` CSV report (latencies in microseconds).
THROUGHPUT_COLUMN = "Inferences/Second"
P50_COLUMN = "p50 latency"
P99_COLUMN = "p99 latency"
# Printed when the windows never agree within --stability-percentage: a noisy machine, not a
# server fault, so the run is repeated (same settings) up to UNSTABLE_ATTEMPTS times.
UNSTABLE_TEXT = "Failed to obtain stable measurement"
UNSTABLE_ATTEMPTS = 2


def perf_command(
    perf_analyzer: Path,
    scenario: Scenario,
    url: str,
    settings: MeasureSettings,
    csv_path: Path,
) -> list[str]:
    """The perf_analyzer command line for one scenario against the server at `url`."""
    c = scenario.concurrency
    return [
        str(perf_analyzer),
        "-m",
        scenario.model,
        "-u",
        url,
        "-i",
        scenario.protocol,
        f"--concurrency-range={c}:{c}",
        f"--measurement-interval={settings.measurement_interval_ms}",
        f"--stability-percentage={settings.stability_percentage}",
        f"--max-trials={settings.max_trials}",
        "-f",
        str(csv_path),
        *scenario.perf_args,
    ]


def parse_csv(text: str) -> tuple[float, float, float]:
    """(infer/s, p50 µs, p99 µs) from the first data row of a perf_analyzer CSV report."""
    rows = list(csv.DictReader(text.splitlines()))
    if not rows:
        raise ValueError("perf_analyzer CSV report has no data row")
    row = rows[0]
    try:
        return float(row[THROUGHPUT_COLUMN]), float(row[P50_COLUMN]), float(row[P99_COLUMN])
    except KeyError as exc:
        raise ValueError(f"perf_analyzer CSV report lacks column {exc}") from exc


def run_perf_analyzer(
    perf_analyzer: Path,
    scenario: Scenario,
    url: str,
    settings: MeasureSettings,
    work_dir: Path,
    log_path: Path,
) -> Measurement:
    """Run one measurement; the tool's full output goes to `log_path`."""
    m = _run_once(perf_analyzer, scenario, url, settings, work_dir, log_path)
    for _ in range(UNSTABLE_ATTEMPTS - 1):
        if m.error is None or UNSTABLE_TEXT not in m.error:
            break
        print(f"[bench] {scenario.name} against {url}: unstable, measuring again", flush=True)
        m = _run_once(perf_analyzer, scenario, url, settings, work_dir, log_path)
    return m


def _run_once(
    perf_analyzer: Path,
    scenario: Scenario,
    url: str,
    settings: MeasureSettings,
    work_dir: Path,
    log_path: Path,
) -> Measurement:
    csv_path = work_dir / f"{log_path.stem}.csv"
    csv_path.unlink(missing_ok=True)
    cmd = perf_command(perf_analyzer, scenario, url, settings, csv_path)
    # perf_analyzer needs at least 3 windows and gives up after max_trials; leave room for
    # connection setup and slow windows on a loaded machine.
    timeout = 60 + 3 * settings.max_trials * settings.measurement_interval_ms / 1000
    try:
        proc = subprocess.run(
            cmd, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL
        )
        output, returncode = proc.stdout + proc.stderr, proc.returncode
    except subprocess.TimeoutExpired as exc:
        output = _text(exc.stdout) + _text(exc.stderr)
        returncode = -1
        output += f"\nperf_analyzer timed out after {timeout:.0f}s"
    log_path.write_text(" ".join(cmd) + "\n\n" + output)
    command = tuple(cmd)
    if returncode != 0 or not csv_path.exists():
        return Measurement(error=failure_text(output, returncode), command=command)
    try:
        throughput, p50, p99 = parse_csv(csv_path.read_text())
    except ValueError as exc:
        return Measurement(error=str(exc), command=command)
    return Measurement(
        throughput=throughput,
        p50_us=p50,
        p99_us=p99,
        notes=problem_lines(output),
        command=command,
    )


def _text(data: bytes | str | None) -> str:
    if data is None:
        return ""
    return data.decode(errors="replace") if isinstance(data, bytes) else data
