from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import pytest
from bench.measurement import Measurement
from bench.server_cpu import (
    CpuSample,
    ModelCounts,
    cpu_us_per_request,
    group_cpu_seconds,
    main_cpu_seconds,
    main_cpu_us_per_request,
    mean_batch_size,
    model_counts,
    parse_counts,
    sample,
)
from bench.tests.local_http import JsonHandler, serving

from tritium.core.statistics import ModelStatistics


def test_group_cpu_grows_while_the_group_computes() -> None:
    pgid = os.getpgid(0)
    before = group_cpu_seconds(pgid)
    end = time.process_time() + 0.2
    while time.process_time() < end:
        pass
    assert group_cpu_seconds(pgid) - before >= 0.15


def test_main_cpu_counts_the_leader_process_alone() -> None:
    # The leader of a new session burns CPU in a child: the group grows, its leader does not.
    burn = "import time\nend = time.process_time() + 0.3\nwhile time.process_time() < end: pass"
    code = (
        f"import subprocess, sys, time; subprocess.run([sys.executable, '-c', {burn!r}]); "
        "print('reaped', flush=True); time.sleep(60)"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", code], start_new_session=True, stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None
        ready, _, _ = select.select([proc.stdout], [], [], 60)
        assert ready and proc.stdout.readline() == "reaped\n"
        assert main_cpu_seconds(proc.pid) < 0.2
        assert group_cpu_seconds(proc.pid) >= 0.25  # the reaped child's CPU, via the leader
    finally:
        proc.kill()
        proc.wait()
    before = main_cpu_seconds(os.getpid())
    end = time.process_time() + 0.2
    while time.process_time() < end:
        pass
    assert main_cpu_seconds(os.getpid()) - before >= 0.15


def test_main_cpu_per_request_uses_the_main_process_share() -> None:
    before = CpuSample(1.0, 100, main_cpu_s=0.8)
    assert main_cpu_us_per_request(before, CpuSample(1.5, 1100, main_cpu_s=1.2)) == (
        pytest.approx(400.0)
    )
    assert main_cpu_us_per_request(CpuSample(1.0, 100), CpuSample(1.5, 1100, main_cpu_s=1)) is None
    assert main_cpu_us_per_request(before, None) is None


def test_cpu_per_request_divides_by_requests_served() -> None:
    assert cpu_us_per_request(CpuSample(1.0, 100), CpuSample(1.5, 1100)) == 500.0
    assert cpu_us_per_request(CpuSample(1.0, 100), CpuSample(1.5, 100)) is None
    assert cpu_us_per_request(CpuSample(1.0, None), CpuSample(1.5, 100)) is None
    assert cpu_us_per_request(None, CpuSample(1.5, 100)) is None


def test_mean_batch_size_divides_rows_by_executions() -> None:
    before = CpuSample(1.0, 100, inferences=1_000, executions=100)
    assert mean_batch_size(before, CpuSample(2.0, 200, 3_340, 200)) == pytest.approx(23.4)
    # Rows and executions are taken over the span, not as totals.
    assert mean_batch_size(before, CpuSample(2.0, 200, 1_600, 300)) == 3.0
    # No execution in between, a counter unknown, or counters that went back (a restart).
    assert mean_batch_size(before, CpuSample(2.0, 200, 1_000, 100)) is None
    assert mean_batch_size(before, CpuSample(2.0, 200, 3_000, None)) is None
    assert mean_batch_size(CpuSample(1.0, 100), CpuSample(2.0, 200, 3_000, 200)) is None
    assert mean_batch_size(before, CpuSample(2.0, 200, 500, 150)) is None
    assert mean_batch_size(before, CpuSample(2.0, 200, 900, 50)) is None
    assert mean_batch_size(None, before) is None and mean_batch_size(before, None) is None


def _stats_body(*versions: ModelStatistics) -> bytes:
    """The statistics extension's answer as tritium writes it, one entry per version."""
    entries = [v.as_json("identity", str(i + 1)) for i, v in enumerate(versions)]
    return json.dumps({"model_stats": entries}).encode()


def _batches(stats: ModelStatistics, *sizes: int) -> None:
    for rows in sizes:
        stats.record_execution(rows, rows, 1, 1, 1)
        for _ in range(rows):
            stats.record_request(True, 10, 1)


def test_parse_counts_reads_requests_rows_and_batches_summed_over_versions() -> None:
    v1, v2 = ModelStatistics(), ModelStatistics()
    _batches(v1, 4, 6)
    _batches(v2, 5)
    v2.record_request(False, 10, 0)  # a failed request is not a success
    assert parse_counts(_stats_body(v1, v2)) == ModelCounts(
        requests=15, inferences=15, executions=3
    )


def test_parse_counts_keeps_the_fields_present() -> None:
    # Triton's shape; a server without the batch counters still gives the request count.
    entry: dict[str, Any] = {"inference_stats": {"success": {"count": 7, "ns": 1}}}
    assert parse_counts(json.dumps({"model_stats": [entry]}).encode()) == ModelCounts(7, None, None)
    entry.update(inference_count="40", execution_count="5")  # int64 may come as strings
    assert parse_counts(json.dumps({"model_stats": [entry]}).encode()) == ModelCounts(7, 40, 5)
    assert parse_counts(b"not json") == ModelCounts(None, None, None)
    assert parse_counts(b'{"error": "x"}') == ModelCounts(None, None, None)


class _StatsHandler(JsonHandler):
    stats = ModelStatistics()
    paths: list[str] = []

    def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
        _StatsHandler.paths.append(self.path)
        if self.path == "/v2/models/identity/stats":
            self.reply(200, _stats_body(_StatsHandler.stats))
        else:
            self.reply(400, b'{"error": "unknown model"}')


@pytest.fixture
def stats_server() -> Iterator[str]:
    _StatsHandler.stats = ModelStatistics()
    _StatsHandler.paths = []
    with serving(_StatsHandler) as url:
        yield url


def test_samples_give_cpu_per_request_and_mean_batch_over_the_span(stats_server: str) -> None:
    _batches(_StatsHandler.stats, 1, 1)  # warm-up before the run
    pgid = os.getpgid(0)
    before = sample(pgid, stats_server, "identity")
    _batches(_StatsHandler.stats, 20, 30, 25)
    after = sample(pgid, stats_server, "identity")
    # One GET per sample reads all three counters.
    assert _StatsHandler.paths == ["/v2/models/identity/stats"] * 2
    assert before is not None and after is not None
    assert (before.requests, before.inferences, before.executions) == (2, 2, 2)
    assert (after.requests, after.inferences, after.executions) == (77, 77, 5)
    assert mean_batch_size(before, after) == 25.0
    cpu = cpu_us_per_request(before, after)
    assert cpu is not None and cpu >= 0
    main = main_cpu_us_per_request(before, after)
    assert main is not None and 0 <= main <= cpu + 1e-9
    assert sample(None, stats_server, "identity") is None


def test_a_failing_stats_endpoint_leaves_the_counters_unknown(stats_server: str) -> None:
    assert model_counts(stats_server, "nope") == ModelCounts(None, None, None)
    assert model_counts("127.0.0.1:1", "identity") == ModelCounts(None, None, None)
    s = sample(os.getpgid(0), stats_server, "nope")
    assert s is not None and s.cpu_s > 0
    assert mean_batch_size(s, s) is None and cpu_us_per_request(s, s) is None


def test_console_line_shows_cpu_and_batch() -> None:
    from bench import runner

    m = Measurement(throughput=1000.0, p50_us=100.0, p99_us=200.0)
    assert "batch" not in runner._line(m) and "CPU" not in runner._line(m)
    line = runner._line(
        Measurement(1000.0, 100.0, 200.0, server_cpu_us=75.0, mean_batch_size=23.44)
    )
    assert line.endswith("server CPU     75 µs/infer  batch  23.4")
    line = runner._line(
        Measurement(1000.0, 100.0, 200.0, server_cpu_us=75.0, server_main_cpu_us=61.2)
    )
    assert line.endswith("server CPU     75 µs/infer (main 61)")


def test_a_dead_server_is_restarted_and_its_log_kept(tmp_path, monkeypatch) -> None:
    from bench import runner

    class Dead:
        name = "triton"
        url = "127.0.0.1:1"
        log_file = tmp_path / "triton.log"
        calls: list[str] = []

        def stop(self) -> None:
            self.calls.append("stop")

        def start(self) -> None:
            self.calls.append("start")

    server = Dead()
    server.log_file.write_text("Signal (11) received.\n")
    monkeypatch.setattr(runner, "http_get", lambda url, timeout=3.0: (0, b""))
    monkeypatch.setattr(
        runner, "wait_models_ready", lambda url, models: server.calls.append("ready")
    )
    runner._restart_if_dead(server, ["identity"], tmp_path)  # type: ignore[arg-type]
    assert server.calls == ["stop", "start", "ready"]
    assert (tmp_path / "triton.log.dead-1").read_text() == "Signal (11) received.\n"

    server.calls.clear()
    monkeypatch.setattr(runner, "http_get", lambda url, timeout=3.0: (200, b""))
    runner._restart_if_dead(server, ["identity"], tmp_path)  # type: ignore[arg-type]
    assert server.calls == []
