"""The chaos tool: its ledger's rules (no sockets), the soak's slope verdict, and a short
chaos run against a real server (the suite's check that every request is answered exactly
once under faults); the soak's short version runs under the ``slow`` marker."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from bench.chaos import Options, markdown, run
from bench.chaos_ledger import ABANDON, DEADLINE, Ledger, Outcome
from bench.soak_samples import Sample, slope, throughput, verdict


def test_one_good_answer_breaks_no_rule():
    ledger = Ledger()
    request = ledger.open("http/unary", "m", 5.0)
    ledger.final(request, Outcome("ok"), request.tag)
    ledger.close_out()
    assert ledger.violations == []
    assert ledger.table()[0]["ok"] == 1


def test_a_second_final_answer_is_caught():
    ledger = Ledger()
    request = ledger.open("grpc/stream", "m", 5.0)
    ledger.final(request, Outcome("ok"), request.tag)
    ledger.final(request, Outcome("error", "StatusCode.UNAVAILABLE", "gone"))
    assert ledger.violations == ["grpc/stream m #1: a second final answer (error)"]


def test_another_requests_tag_is_caught():
    ledger = Ledger()
    first, second = ledger.open("grpc/unary", "m", 5.0), ledger.open("grpc/unary", "m", 5.0)
    ledger.final(first, Outcome("ok"), second.tag)
    assert "answer carries TAG" in ledger.violations[0]
    ledger.response(second, first.tag)
    assert "response carries TAG" in ledger.violations[1]


def test_requests_left_without_a_final_answer_are_caught():
    ledger = Ledger()
    ledger.open("grpc/stream", "m", 5.0)
    ledger.open("http/disconnect", "m", 5.0, ABANDON)  # the client left: nothing owed
    ledger.close_out()
    assert ledger.violations == ["grpc/stream m #1: no final answer"]


@pytest.mark.parametrize(
    ("outcome", "expect", "problem"),
    [
        (Outcome("error", "StatusCode.UNAVAILABLE", "instance restarting"), "answer", ""),
        (Outcome("error", "503", ""), "answer", "without a message"),
        (Outcome("error", "500", "internal error in infer"), "answer", "internal error"),
        (Outcome("deadline"), DEADLINE, ""),
        (Outcome("deadline"), "answer", "no answer within"),
        (Outcome("dropped", detail="reset"), "answer", "connection dropped"),
    ],
)
def test_which_errors_are_clear(outcome, expect, problem):
    ledger = Ledger()
    ledger.final(ledger.open("k", "m", 5.0, expect), outcome)
    assert (problem in ledger.violations[0]) if problem else ledger.violations == []


def test_a_late_answer_is_caught():
    ledger = Ledger(bound_s=0.0)
    request = ledger.open("k", "m", 0.01)
    time.sleep(0.03)
    ledger.final(request, Outcome("ok"), request.tag)
    assert "final answer after" in ledger.violations[0]


def _samples(rss_per_s: float, fds: int = 40) -> list[Sample]:
    return [
        Sample(t, 100 + rss_per_s * t, 300.0, fds, 20, 6, 3, int(50 * t), t / 10, 1.0)
        for t in range(0, 600, 3)
    ]


def test_slope_of_a_line():
    assert slope([0, 1, 2, 3], [1, 3, 5, 7]) == pytest.approx(2.0)
    assert slope([1], [5]) == 0.0


def test_flat_series_pass_and_a_leak_is_caught():
    flat = verdict(_samples(0.0), warmup_s=60)
    assert all(info["flat"] for info in flat.values())
    leak = verdict(_samples(0.02), warmup_s=60)  # 72 MiB/h: 10.7 MiB over the 537 s kept
    assert not leak["server_rss_mib"]["flat"] and leak["server_rss_mib"]["per_hour"] == 72.0
    assert leak["server_rss_mib"]["rise"] == pytest.approx(10.74)
    assert leak["fds"]["flat"]


def test_throughput_at_the_start_and_at_the_end():
    rates = throughput(_samples(0.0), warmup_s=60, window_s=60)
    assert rates["start"] == pytest.approx(50.0) and rates["end"] == pytest.approx(50.0)
    assert rates["start_per_cpu_s"] == pytest.approx(500.0)  # 50/s at 0.1 CPU-s per s


@pytest.mark.timeout(300)
def test_a_short_chaos_run_answers_every_request_exactly_once():
    report = run(Options(seconds=20.0, results=None))
    text = markdown(report) + "\n".join(report.violations[:20])
    assert report.passed, text
    sent = {row["kind"]: row["sent"] for row in report.table}
    for kind in ("http/unary", "grpc/unary", "grpc/stream", "grpc/sequence", "grpc/burst"):
        assert sent.get(kind, 0) > 0, text
    assert report.faults.get("kill", 0) >= 2 and report.faults.get("reload", 0) >= 1, text


@pytest.mark.slow
@pytest.mark.timeout(400)
def test_a_short_soak_keeps_resources_flat(tmp_path: Path):
    report = run(
        Options(seconds=90.0, soak=True, fault_interval=5.0, warmup_s=30.0, results=tmp_path)
    )
    assert report.passed, markdown(report) + "\n".join(report.violations[:20])
    assert list(tmp_path.glob("*.png"))
