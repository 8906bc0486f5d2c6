"""Run wrk with a fixed v2 JSON infer body (perf_analyzer only speaks binary tensors well)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

from bench.measurement import Measurement, failure_text
from bench.scenarios import MeasureSettings, Scenario
from bench.servers import http_post_json

LUA_SCRIPT = Path(__file__).resolve().parent / "wrk_post_json.lua"
SUMMARY_PREFIX = "BENCH_JSON "


def infer_path(scenario: Scenario) -> str:
    return f"/v2/models/{scenario.model}/infer"


def wrk_command(
    wrk: Path, scenario: Scenario, url: str, duration_s: int, threads: int, body_path: Path
) -> list[str]:
    """The wrk command line posting `body_path` at the scenario's connection count."""
    return [
        str(wrk),
        f"-t{min(threads, scenario.concurrency)}",
        f"-c{scenario.concurrency}",
        f"-d{duration_s}s",
        "--timeout=10s",
        "-s",
        str(LUA_SCRIPT),
        f"http://{url}{infer_path(scenario)}",
        "--",
        str(body_path),
    ]


def parse_summary(output: str) -> dict[str, Any]:
    """The BENCH_JSON summary line printed by wrk_post_json.lua."""
    for line in output.splitlines():
        if line.startswith(SUMMARY_PREFIX):
            data = json.loads(line[len(SUMMARY_PREFIX) :])
            if isinstance(data, dict):
                return data
    raise ValueError("wrk printed no BENCH_JSON summary line")


def summary_measurement(summary: dict[str, Any], command: tuple[str, ...]) -> Measurement:
    """Turn a wrk summary into a Measurement; any socket or HTTP error fails the run."""
    errors = {k: int(v) for k, v in summary.get("errors", {}).items() if v}
    if errors:
        detail = ", ".join(f"{k}={v}" for k, v in sorted(errors.items()))
        return Measurement(
            error=f"wrk saw errors in {summary['requests']:.0f} requests: {detail}",
            command=command,
        )
    duration_s = float(summary["duration_us"]) / 1e6
    if duration_s <= 0 or not summary["requests"]:
        return Measurement(error="wrk completed no request", command=command)
    return Measurement(
        throughput=float(summary["requests"]) / duration_s,
        p50_us=float(summary["p50_us"]),
        p99_us=float(summary["p99_us"]),
        command=command,
    )


def check_response(status: int, body: bytes) -> str | None:
    """None when a JSON infer answer looks right, else why not (quoted from the server)."""
    if status != 200:
        return f"HTTP {status}: {body[:400].decode(errors='replace')}"
    try:
        answer = json.loads(body)
    except ValueError:
        return f"HTTP 200 but the body is not JSON: {body[:200]!r}"
    if not isinstance(answer, dict) or not answer.get("outputs"):
        return f"HTTP 200 but no outputs in the answer: {body[:400].decode(errors='replace')}"
    return None


def run_wrk(
    wrk: Path,
    scenario: Scenario,
    url: str,
    settings: MeasureSettings,
    work_dir: Path,
    log_path: Path,
) -> Measurement:
    """Check one request by hand, warm up, then measure; full output goes to `log_path`."""
    assert scenario.json_body is not None, f"{scenario.name} has no JSON body"
    body = json.dumps(scenario.json_body).encode()
    body_path = work_dir / f"{scenario.name}.json"
    body_path.write_bytes(body)
    problem = check_response(*http_post_json(f"http://{url}{infer_path(scenario)}", body))
    if problem is not None:
        log_path.write_text(f"single JSON request failed: {problem}\n")
        return Measurement(error=f"single JSON request failed: {problem}")

    def run(duration_s: int) -> tuple[list[str], str, int]:
        cmd = wrk_command(wrk, scenario, url, duration_s, settings.wrk_threads, body_path)
        try:
            proc = subprocess.run(
                cmd,
                capture_output=True,
                text=True,
                timeout=duration_s + 60,
                stdin=subprocess.DEVNULL,
            )
        except subprocess.TimeoutExpired:
            return cmd, f"wrk did not finish within {duration_s + 60}s", -1
        return cmd, proc.stdout + proc.stderr, proc.returncode

    run(settings.wrk_warmup_s)
    cmd, output, returncode = run(settings.wrk_duration_s)
    log_path.write_text(" ".join(cmd) + "\n\n" + output)
    command = tuple(cmd)
    if returncode != 0:
        return Measurement(error=failure_text(output, returncode), command=command)
    try:
        summary = parse_summary(output)
    except ValueError as exc:
        return Measurement(error=str(exc), command=command)
    return summary_measurement(summary, command)
