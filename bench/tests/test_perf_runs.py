"""run_perf_analyzer against a stand-in perf_analyzer script (no server needed)."""

from __future__ import annotations

import stat
from pathlib import Path

from bench.measurement import Measurement
from bench.perf import run_perf_analyzer
from bench.scenarios import QUICK_SETTINGS, select_scenarios

CSV = "Concurrency,Inferences/Second,p50 latency,p99 latency\\n1,1234.5,300,900\\n"

# Fails with perf_analyzer's "unstable" message the first FAILS times, then writes its report.
FAKE = """#!/bin/sh
count_file="$(dirname "$0")/count"
n=$(cat "$count_file" 2>/dev/null || echo 0); n=$((n + 1)); echo $n > "$count_file"
if [ $n -le {fails} ]; then
  echo "Failed to obtain stable measurement within 6 measurement windows for concurrency 1."
  echo "Failed to obtain stable measurement."
  exit 2
fi
while [ $# -gt 0 ]; do [ "$1" = "-f" ] && out=$2; shift; done
printf '{csv}' > "$out"
echo "WARNING: server-side statistics are unavailable"
"""


def fake_tool(tmp_path: Path, fails: int) -> Path:
    tool = tmp_path / "perf_analyzer"
    tool.write_text(FAKE.format(fails=fails, csv=CSV))
    tool.chmod(tool.stat().st_mode | stat.S_IXUSR)
    return tool


def run(tmp_path: Path, fails: int) -> Measurement:
    scenario = select_scenarios(["add_sub_http_binary_c1"])[0]
    log = tmp_path / "run.log"
    return run_perf_analyzer(
        fake_tool(tmp_path, fails), scenario, "127.0.0.1:1", QUICK_SETTINGS, tmp_path, log
    )


def test_success_reads_csv_and_keeps_warnings(tmp_path: Path) -> None:
    m = run(tmp_path, fails=0)
    assert m.ok and (m.throughput, m.p50_us, m.p99_us) == (1234.5, 300.0, 900.0)
    assert m.notes == ("WARNING: server-side statistics are unavailable",)
    assert (tmp_path / "run.log").read_text().startswith(str(tmp_path / "perf_analyzer"))


def test_one_unstable_run_is_measured_again(tmp_path: Path) -> None:
    m = run(tmp_path, fails=1)
    assert m.ok and m.throughput == 1234.5
    assert (tmp_path / "count").read_text().strip() == "2"


def test_repeatedly_unstable_is_an_error_with_the_tool_text(tmp_path: Path) -> None:
    m = run(tmp_path, fails=5)
    assert not m.ok
    assert m.error is not None and m.error.startswith(
        "exit code 2: Failed to obtain stable measurement within 6"
    )
    assert (tmp_path / "count").read_text().strip() == "2"
