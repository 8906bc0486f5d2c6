from __future__ import annotations

import os
import time

from bench.server_cpu import CpuSample, cpu_us_per_request, group_cpu_seconds


def test_group_cpu_grows_while_the_group_computes() -> None:
    pgid = os.getpgid(0)
    before = group_cpu_seconds(pgid)
    end = time.process_time() + 0.2
    while time.process_time() < end:
        pass
    assert group_cpu_seconds(pgid) - before >= 0.15


def test_cpu_per_request_divides_by_requests_served() -> None:
    assert cpu_us_per_request(CpuSample(1.0, 100), CpuSample(1.5, 1100)) == 500.0
    assert cpu_us_per_request(CpuSample(1.0, 100), CpuSample(1.5, 100)) is None
    assert cpu_us_per_request(CpuSample(1.0, None), CpuSample(1.5, 100)) is None
    assert cpu_us_per_request(None, CpuSample(1.5, 100)) is None


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
    monkeypatch.setattr(runner, "wait_models_ready", lambda url, models: server.calls.append("ready"))
    runner._restart_if_dead(server, ["identity"], tmp_path)  # type: ignore[arg-type]
    assert server.calls == ["stop", "start", "ready"]
    assert (tmp_path / "triton.log.dead-1").read_text() == "Signal (11) received.\n"

    server.calls.clear()
    monkeypatch.setattr(runner, "http_get", lambda url, timeout=3.0: (200, b""))
    runner._restart_if_dead(server, ["identity"], tmp_path)  # type: ignore[arg-type]
    assert server.calls == []
