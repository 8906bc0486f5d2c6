"""Medians, ratios and the Markdown table."""

from __future__ import annotations

from dataclasses import replace

import pytest
from bench.measurement import Measurement
from bench.report import (
    BaselineRatios,
    ScenarioResult,
    baseline_lines,
    compare_to_baseline,
    markdown_report,
    markdown_table,
    paired_ratio,
    report_json,
    summarize,
)
from bench.scenarios import select_scenarios

META = {
    "timestamp": "T",
    "commit": "abc",
    "machine": "2 CPUs",
    "servers": "s",
    "rounds": 3,
    "setup": "x",
}


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
    page = markdown_report(META, [ok, skipped])
    assert "- `add_sub_http_binary_c8` tritium round 2: Thread [0] had error: x" in page


def _identity_pair() -> tuple[ScenarioResult, ScenarioResult]:
    base, inst2 = (
        ScenarioResult(s)
        for s in select_scenarios(["identity_http_binary_c64", "identity_inst2_http_binary_c64"])
    )
    return base, inst2


def test_every_baseline_names_a_known_scenario() -> None:
    named = {s.name: s.baseline for s in select_scenarios(None) if s.baseline}
    assert named == {"identity_inst2_http_binary_c64": "identity_http_binary_c64"}
    assert set(named.values()) <= {s.name for s in select_scenarios(None)}


def test_paired_ratio_pairs_rounds_and_skips_failed_ones() -> None:
    err = Measurement(error="x")
    # Round 2: the scenario failed; round 3: the baseline failed; both are left out.
    assert paired_ratio([m(110), err, m(330), m(360)], [m(100), m(200), err, m(400)]) == (
        pytest.approx(1.0)
    )
    # An interrupted run leaves the later scenario a round short: unpaired rounds do not count.
    assert paired_ratio([m(30)], [m(10), m(1000)]) == 3.0
    assert paired_ratio([err], [m(10)]) is None
    assert paired_ratio([], []) is None


def test_comparison_with_the_baseline_scenario_per_server() -> None:
    base, inst2 = _identity_pair()
    err = Measurement(error="x")
    base.runs["tritium"] = [m(100), m(200), err, m(400)]
    inst2.runs["tritium"] = [m(110), err, m(330), m(360)]
    # Triton drifts up over the rounds: the medians mislead, the paired rounds do not.
    base.runs["triton"] = [m(100), m(200), m(300)]
    inst2.runs["triton"] = [m(90), m(180), m(600)]
    c = compare_to_baseline(inst2, [base, inst2])
    assert c is not None and (c.scenario, c.baseline) == (inst2.scenario.name, base.scenario.name)
    assert c.servers["tritium"] == BaselineRatios(median_ratio=330 / 200, paired_ratio=1.0)
    assert c.servers["triton"] == BaselineRatios(median_ratio=180 / 200, paired_ratio=0.9)
    assert c.line() == (
        "`identity_inst2_http_binary_c64` vs `identity_http_binary_c64`: "
        "tritium 1.65× (paired 1.00×), Triton 0.90× (paired 0.90×)"
    )
    data = report_json({}, [base, inst2])["scenarios"]
    assert data[0]["baseline"] is None
    assert data[1]["baseline"] == {
        "scenario": "identity_http_binary_c64",
        "tritium": {"median_ratio": 1.65, "paired_ratio": 1.0},
        "triton": {"median_ratio": 0.9, "paired_ratio": 0.9},
    }
    page = markdown_report(META, [base, inst2])
    assert "\n## Against a baseline scenario\n" in page
    assert f"\n- {c.line()}\n" in page
    assert baseline_lines([base, inst2]) == [c.line()]


def test_no_comparison_without_the_baseline_scenario_in_the_run() -> None:
    base, inst2 = _identity_pair()
    inst2.runs["tritium"] = [m(100)]
    assert compare_to_baseline(inst2, [inst2]) is None
    assert compare_to_baseline(base, [base, inst2]) is None  # it names no baseline
    assert report_json({}, [inst2])["scenarios"][0]["baseline"] is None
    assert baseline_lines([inst2]) == []
    assert "Against a baseline" not in markdown_report(META, [inst2])


def test_a_baseline_without_successful_runs_gives_no_ratios() -> None:
    base, inst2 = _identity_pair()
    base.runs["tritium"] = [Measurement(error="x")]
    inst2.runs["tritium"] = [m(100)]
    c = compare_to_baseline(inst2, [base, inst2])
    assert c is not None
    assert c.servers["tritium"] == BaselineRatios(None, None)
    assert "tritium — (paired —)" in c.line()
