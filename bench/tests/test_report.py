"""Medians, ratios and the Markdown table."""

from __future__ import annotations

import math
import statistics
from dataclasses import replace

import pytest
from bench.measurement import Measurement
from bench.report import (
    BaselineRatios,
    PairedRatio,
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
    assert named == {
        "identity_inst2_http_binary_c64": "identity_http_binary_c64",
        "identity_async_http_binary_c64": "identity_http_binary_c64",
    }
    assert set(named.values()) <= {s.name for s in select_scenarios(None)}


def test_paired_ratio_pairs_rounds_and_skips_failed_ones() -> None:
    err = Measurement(error="x")
    # Round 2: the scenario failed; round 3: the baseline failed; both are left out.
    p = paired_ratio([m(110), err, m(330), m(360)], [m(100), m(200), err, m(400)])
    assert p is not None and p.rounds == 2
    assert p.estimate == pytest.approx(math.sqrt(1.1 * 0.9))
    # An interrupted run leaves the later scenario a round short: unpaired rounds do not count.
    one = paired_ratio([m(30)], [m(10), m(1000)])
    assert one is not None and (one.low, one.high, one.rounds) == (None, None, 1)
    assert one.estimate == pytest.approx(3.0)
    assert paired_ratio([err], [m(10)]) is None
    assert paired_ratio([], []) is None


def test_paired_ratio_interval_is_a_t_interval_on_the_log_ratios() -> None:
    ratios = [0.9, 1.0, 1.1, 1.05, 0.95]
    p = paired_ratio([m(100 * r) for r in ratios], [m(100)] * 5)
    logs = [math.log(r) for r in ratios]
    half = 2.776 * statistics.stdev(logs) / math.sqrt(5)  # t(0.975, 4 df)
    assert p is not None and p.rounds == 5
    assert p.estimate == pytest.approx(math.exp(statistics.fmean(logs)))
    assert p.low == pytest.approx(math.exp(statistics.fmean(logs) - half))
    assert p.high == pytest.approx(math.exp(statistics.fmean(logs) + half))
    # Many rounds: the normal quantile.
    many = paired_ratio([m(100 * r) for r in ratios * 8], [m(100)] * 40)
    half = 1.96 * statistics.stdev(logs * 8) / math.sqrt(40)
    assert many is not None and many.high == pytest.approx(math.exp(statistics.fmean(logs) + half))


@pytest.mark.parametrize(
    ("low", "high", "verdict"),
    [
        (0.95, 1.04, "pass"),  # no fall seen, and a 10% one would have been
        (1.02, 1.10, "pass"),  # faster than the baseline
        (0.90, 1.00, "pass"),
        (0.93, 0.99, "FAIL"),  # a significant fall
        (0.85, 1.05, "inconclusive"),  # too noisy to rule a 10% fall out
        (None, None, "inconclusive"),  # a single round
    ],
)
def test_paired_ratio_verdict(low: float | None, high: float | None, verdict: str) -> None:
    assert PairedRatio(1.0, low, high, 5).verdict() == verdict


def test_comparison_with_the_baseline_scenario_per_server() -> None:
    base, inst2 = _identity_pair()
    err = Measurement(error="x")
    base.runs["tritium"] = [m(100), m(200), err, m(400)]
    inst2.runs["tritium"] = [m(110), err, m(330), m(360)]
    # Triton drifts up over the rounds: the medians mislead, the paired rounds do not.
    base.runs["triton"] = [m(100), m(200), m(300)]
    inst2.runs["triton"] = [m(90), m(180), m(270)]
    c = compare_to_baseline(inst2, [base, inst2])
    assert c is not None and (c.scenario, c.baseline) == (inst2.scenario.name, base.scenario.name)
    tritium, triton = c.servers["tritium"], c.servers["triton"]
    assert tritium.median_ratio == 330 / 200 and triton.median_ratio == 180 / 200
    assert tritium.paired == paired_ratio(inst2.runs["tritium"], base.runs["tritium"])
    assert triton.paired is not None and triton.paired.estimate == pytest.approx(0.9)
    # Two rounds at 1.1 and 0.9 cannot rule out a 10% fall.
    assert c.verdict == "inconclusive"
    assert tritium.paired is not None and tritium.paired.low is not None
    assert c.line() == (
        "`identity_inst2_http_binary_c64` vs `identity_http_binary_c64`: "
        f"tritium 1.65× (paired 0.99×, 95% CI {tritium.paired.low:.2f}–"
        f"{tritium.paired.high:.2f}, 2 rounds), "
        "Triton 0.90× (paired 0.90×, 95% CI 0.90–0.90, 3 rounds); "
        "tritium not below the baseline: inconclusive"
    )
    data = report_json({}, [base, inst2])["scenarios"]
    assert data[0]["baseline"] is None
    assert data[1]["baseline"] == {
        "scenario": "identity_http_binary_c64",
        "check": "inconclusive",
        "tritium": {"median_ratio": 1.65, "paired": vars(tritium.paired)},
        "triton": {"median_ratio": 0.9, "paired": vars(triton.paired)},
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
    assert c.verdict == "inconclusive"
