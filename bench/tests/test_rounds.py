"""run_bench with stand-in servers and a stand-in load generator: round-major order, the crash
retry, results writing and interrupts (no server or tool is started)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
from bench import runner, server_cpu
from bench.anchors import Anchors
from bench.measurement import Measurement
from bench.scenarios import QUICK_SETTINGS, Scenario, select_scenarios


class FakeServer:
    """Answers while `alive`; a start brings it back."""

    pgid = None

    def __init__(self, name: str, port: int) -> None:
        self.name = name
        self.url = f"127.0.0.1:{port}"
        self.grpc_url = f"127.0.0.1:{port + 1}"
        self.alive = False
        self.calls: list[str] = []

    def start(self) -> None:
        self.calls.append("start")
        self.alive = True

    def stop(self) -> None:
        self.calls.append("stop")
        self.alive = False


class Bench:
    """Patches run_bench's collaborators; `measure` decides each run's result."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
        self.tmp_path = tmp_path
        self.servers = {"tritium": FakeServer("tritium", 100), "triton": FakeServer("triton", 200)}
        self.order: list[tuple[str, str]] = []  # (scenario, server) of every run, in run order
        by_url = {s.url: s for s in self.servers.values()}
        monkeypatch.setattr(runner, "TritiumServer", lambda *a: self.servers["tritium"])
        monkeypatch.setattr(runner, "TritonServer", lambda *a: self.servers["triton"])
        monkeypatch.setattr(runner, "wait_models_ready", lambda url, models: None)
        monkeypatch.setattr(runner.run_meta, "server_metadata", lambda url: {"version": "0"})
        monkeypatch.setattr(runner.run_meta, "commit", lambda: "abc")
        monkeypatch.setattr(runner, "_alive", lambda server: server.alive)
        monkeypatch.setattr(server_cpu, "sample", lambda pgid, url, model: None)

        def measure(scenario: Scenario, url: str, *args: Any) -> Measurement:
            server = by_url[url]
            self.order.append((scenario.name, server.name))
            return self.measure(scenario, server)

        monkeypatch.setattr(runner, "_measure", measure)

    def measure(self, scenario: Scenario, server: FakeServer) -> Measurement:
        return Measurement(throughput=1000.0 + len(self.order), p50_us=100.0, p99_us=200.0)

    def run(self, names: list[str], rounds: int) -> int:
        anchors = Anchors(*(self.tmp_path / n for n in ("tools", "prefix", "pa", "st", "ss")), None)
        return runner.run_bench(
            anchors,
            select_scenarios(names),
            QUICK_SETTINGS,
            rounds,
            repository=self.tmp_path,
            triton_ports=(200, 201, 202),
            tritium_port=100,
            results_dir=self.tmp_path / "results",
        )

    def report(self) -> dict[str, Any]:
        (path,) = (self.tmp_path / "results").glob("*.json")
        return json.loads(path.read_text())


@pytest.fixture
def bench(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Bench:
    return Bench(monkeypatch, tmp_path)


A, B, C = "add_sub_http_binary_c1", "identity_http_binary_c64", "identity_inst2_http_binary_c64"


def test_each_round_runs_every_scenario_tritium_then_triton(bench: Bench, capsys) -> None:
    assert bench.run([A, B, C, "identity_http_json_c64"], rounds=2) == 0
    # C (baseline B) runs right after B on each server, and right before it in even rounds.
    odd = [
        (A, "tritium"),
        (A, "triton"),
        (B, "tritium"),
        (C, "tritium"),
        (B, "triton"),
        (C, "triton"),
    ]
    even = [
        (A, "tritium"),
        (A, "triton"),
        (C, "tritium"),
        (B, "tritium"),
        (C, "triton"),
        (B, "triton"),
    ]
    assert bench.order == odd + even
    out = capsys.readouterr().out
    # The wrk scenario (no wrk here) is reported once, not once per round.
    assert out.count("identity_http_json_c64: skipped (wrk not on PATH)") == 1
    rounds = [line.split(" round ")[1][:3] for line in out.splitlines() if " round " in line]
    assert rounds == ["1/2"] * 6 + ["2/2"] * 6
    line = f"[bench] {B} round 2/2 triton      1012.0 infer/s  p50      100 µs  p99      200 µs"
    assert line + "\n" in out
    data = bench.report()
    assert [s["skipped"] for s in data["scenarios"]] == [None, None, "wrk not installed", None]
    # Each server's runs are in round order: runs 5 and 12 of the sequence are B's on Triton.
    assert [r["throughput"] for r in data["scenarios"][1]["runs"]["triton"]] == [1005, 1012]
    assert all(s.calls == ["start", "stop"] for s in bench.servers.values())


def test_baseline_comparison_reaches_json_markdown_and_console(bench: Bench, capsys) -> None:
    assert bench.run([B, C], rounds=2) == 0
    data = bench.report()
    baseline = data["scenarios"][1]["baseline"]
    assert baseline["scenario"] == B
    # Runs are numbered 1001.. in run order: B then C on tritium (1001, 1002), then on Triton
    # (1003, 1004); round 2 reverses the pair: C, B on tritium (1005, 1006), on Triton.
    paired = baseline["tritium"]["paired"]
    assert paired["estimate"] == pytest.approx(math.sqrt(1002 / 1001 * 1005 / 1006))
    assert paired["rounds"] == 2 and paired["low"] < paired["estimate"] < paired["high"]
    assert baseline["check"] == "pass"  # C is checked against B; these pairs barely differ
    assert data["scenarios"][0]["baseline"] is None
    line = (
        f"`{C}` vs `{B}`: tritium 1.00× (paired 1.00×, 95% CI {paired['low']:.2f}–"
        f"{paired['high']:.2f}, 2 rounds)"
    )
    assert line in capsys.readouterr().out
    (md,) = (bench.tmp_path / "results").glob("*.md")
    assert "## Against a baseline scenario\n\nThroughput" in md.read_text()
    assert f"- {line}" in md.read_text()


def test_a_server_that_crashed_is_restarted_and_measured_again(bench: Bench, capsys) -> None:
    crashes = ["triton"]

    def measure(scenario: Scenario, server: FakeServer) -> Measurement:
        if server.name in crashes:
            crashes.remove(server.name)
            server.alive = False
            return Measurement(error="connection refused")
        return Measurement(throughput=10.0, p50_us=1.0, p99_us=2.0)

    bench.measure = measure  # type: ignore[method-assign]
    assert bench.run([A], rounds=1) == 0
    assert bench.order == [(A, "tritium"), (A, "triton"), (A, "triton")]
    assert bench.servers["triton"].calls == ["start", "stop", "start", "stop"]
    assert "triton is not answering; restarting it" in capsys.readouterr().out
    assert [r["throughput"] for r in bench.report()["scenarios"][0]["runs"]["triton"]] == [10]


def test_an_interrupt_stops_the_servers_and_keeps_the_runs_so_far(bench: Bench) -> None:
    def measure(scenario: Scenario, server: FakeServer) -> Measurement:
        if len(bench.order) == 4:
            raise KeyboardInterrupt
        return Measurement(throughput=10.0, p50_us=1.0, p99_us=2.0)

    bench.measure = measure  # type: ignore[method-assign]
    assert bench.run([A, B], rounds=2) == 130
    assert all(s.calls == ["start", "stop"] for s in bench.servers.values())
    data = bench.report()
    assert data["interrupted"] is True
    runs = [
        (s["scenario"], len(s["runs"]["tritium"]), len(s["runs"]["triton"]))
        for s in data["scenarios"]
    ]
    assert runs == [(A, 1, 1), (B, 1, 0)]
