"""Medians, ratios and the Markdown table."""

from __future__ import annotations

from dataclasses import replace

from bench.measurement import Measurement
from bench.report import ScenarioResult, markdown_report, markdown_table, summarize
from bench.scenarios import select_scenarios


def m(throughput: float, p50: float = 100.0, p99: float = 200.0) -> Measurement:
    return Measurement(throughput=throughput, p50_us=p50, p99_us=p99)


def test_summarize_takes_medians_of_successful_runs_only() -> None:
    s = summarize([m(10, 1, 9), m(30, 3, 7), Measurement(error="boom"), m(20, 2, 8)])
    assert (s.runs, s.failed) == (4, 1)
    assert (s.throughput, s.p50_us, s.p99_us) == (20, 2, 8)
    empty = summarize([Measurement(error="x")])
    assert empty.throughput is None and empty.failed == 1


def test_mean_batch_size_median_reaches_summary_and_json() -> None:
    r = ScenarioResult(select_scenarios(["identity_http_binary_c64"])[0])
    r.runs["tritium"] = [
        replace(m(10), mean_batch_size=20.0),
        replace(m(10), mean_batch_size=30.0),
        replace(m(10), mean_batch_size=None),  # not measurable in that run
        replace(Measurement(error="x"), mean_batch_size=1.0),  # failed runs do not count
    ]
    r.runs["triton"] = [replace(m(10), mean_batch_size=b) for b in (8.0, 12.0, 9.0)]
    assert r.summary("tritium").mean_batch_size == 25.0
    assert r.summary("triton").mean_batch_size == 9.0
    data = r.to_json()
    assert data["median"]["tritium"]["mean_batch_size"] == 25.0
    assert data["median"]["triton"]["mean_batch_size"] == 9.0
    assert [run["mean_batch_size"] for run in data["runs"]["triton"]] == [8.0, 12.0, 9.0]
    assert markdown_table([r]).splitlines()[2].endswith("| 25.0 / 9.0 |  |")


def test_ratios_and_acceptance() -> None:
    r = ScenarioResult(select_scenarios(["add_sub_http_binary_c1"])[0])
    r.runs["tritium"] = [m(1100, p99=300), m(900, p99=100), m(1000, p99=200)]
    r.runs["triton"] = [m(500, p99=400), m(500, p99=400), m(500, p99=400)]
    assert r.throughput_ratio == 2.0
    assert r.p99_ratio == 0.5
    assert r.acceptance == "pass"
    r.runs["tritium"] = [m(499)]
    assert r.acceptance == "FAIL"
    r.runs["tritium"] = [Measurement(error="x")]
    assert r.throughput_ratio is None and r.acceptance == "FAIL"


def test_non_acceptance_scenarios_have_no_check() -> None:
    r = ScenarioResult(select_scenarios(["identity_http_binary_c64"])[0])
    r.runs["tritium"], r.runs["triton"] = [m(1)], [m(100)]
    assert r.acceptance == ""


def test_markdown_table_rows() -> None:
    ok = ScenarioResult(select_scenarios(["add_sub_http_binary_c8"])[0])
    ok.runs["tritium"] = [
        replace(m(3000, 250, 900), server_cpu_us=60.0, mean_batch_size=23.44),
        Measurement(error="Thread [0] had error: x"),
    ]
    ok.runs["triton"] = [replace(m(1500, 500, 1800), server_cpu_us=120.0)]
    skipped = ScenarioResult(select_scenarios(["identity_http_json_c64"])[0], skipped="no wrk")
    table = markdown_table([ok, skipped]).splitlines()
    assert len(table) == 4
    assert table[2] == (
        "| `add_sub_http_binary_c8` | 3,000 (1/2 ok) | 1,500 | 2.00× | 250 | 500 | 900 | 1,800 "
        "| 0.50× | 60 | 120 | 0.50× | 23.4 / — | pass |"
    )
    assert table[3].startswith("| `identity_http_json_c64` | skipped: no wrk |")
    # Every row has as many cells as the header.
    assert {line.count("|") for line in table} == {table[0].count("|")}
    meta = {
        "timestamp": "T",
        "commit": "abc",
        "machine": "2 CPUs",
        "servers": "s",
        "rounds": 3,
        "setup": "x",
    }
    page = markdown_report(meta, [ok, skipped])
    assert "- `add_sub_http_binary_c8` tritium round 2: Thread [0] had error: x" in page
