"""Tool discovery, process-group cleanup helpers, signal handling and the wrk Lua script."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from bench.anchors import BenchSetupError, locate_anchors
from bench.runner import _terminate_as_interrupt, _uninterruptible
from bench.scenarios import QUICK_SETTINGS, Scenario
from bench.servers import group_pids
from bench.tests.local_http import JsonHandler, serving
from bench.wrk import run_wrk


def test_missing_tools_folder_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(BenchSetupError, match="TRITIUM_SHARED_TOOLS"):
        locate_anchors(tmp_path / "nowhere", tmp_path / "anchors")


def test_missing_anchors_without_install_names_the_setup_script(tmp_path: Path) -> None:
    for name in ("setup-anchors.sh", "start-triton.sh", "stop-server.sh"):
        (tmp_path / name).write_text("#!/bin/sh\nexit 1\n")
    with pytest.raises(BenchSetupError, match="setup-anchors.sh"):
        locate_anchors(tmp_path, tmp_path / "anchors", install=False)


def test_failed_install_is_reported(tmp_path: Path) -> None:
    for name in ("setup-anchors.sh", "start-triton.sh", "stop-server.sh"):
        (tmp_path / name).write_text("exit 3\n")
    with pytest.raises(BenchSetupError, match="failed"):
        locate_anchors(tmp_path, tmp_path / "anchors")


def test_group_pids_finds_own_group() -> None:
    assert os.getpid() in group_pids(os.getpgid(0))
    assert group_pids(2**22 + 12345) == []


def test_group_pids_include_children_in_sessions_of_their_own() -> None:
    # As tritium starts its instance workers: still counted with the server's group.
    child = subprocess.Popen(["sleep", "30"], start_new_session=True)
    try:
        assert os.getpgid(child.pid) != os.getpgid(0)
        assert child.pid in group_pids(os.getpgid(0))
    finally:
        child.kill()
        child.wait()
    assert child.pid not in group_pids(os.getpgid(0))


def test_sigterm_becomes_keyboard_interrupt_and_handler_is_restored() -> None:
    before = signal.getsignal(signal.SIGTERM)
    with pytest.raises(KeyboardInterrupt), _terminate_as_interrupt():
        signal.raise_signal(signal.SIGTERM)
    assert signal.getsignal(signal.SIGTERM) is before


def test_signal_during_server_stop_waits_until_stop_finished() -> None:
    finished = []

    def stop() -> None:
        signal.raise_signal(signal.SIGTERM)
        finished.append(True)

    with pytest.raises(KeyboardInterrupt), _terminate_as_interrupt():
        _uninterruptible(stop)
    assert finished == [True]


class _InferHandler(JsonHandler):
    bodies: list[bytes] = []

    def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
        body = self.rfile.read(int(self.headers["Content-Length"]))
        _InferHandler.bodies.append(body)
        self.reply(200, json.dumps({"outputs": json.loads(body)["inputs"]}).encode())


@pytest.fixture
def echo_server() -> Iterator[str]:
    with serving(_InferHandler) as url:
        yield url


@pytest.mark.skipif(shutil.which("wrk") is None, reason="wrk not installed")
def test_wrk_posts_the_json_body_and_reports(echo_server: str, tmp_path: Path) -> None:
    body = {"inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": [1, 2], "data": [1, 2]}]}
    scenario = Scenario("t", "m", "wrk", 2, "test", json_body=body)
    _InferHandler.bodies = []
    m = run_wrk(
        Path(shutil.which("wrk") or ""),
        scenario,
        echo_server,
        QUICK_SETTINGS,
        tmp_path,
        tmp_path / "w.log",
    )
    assert m.ok, m.error
    assert m.throughput and m.throughput > 0 and m.p99_us and m.p99_us >= (m.p50_us or 0)
    assert len(_InferHandler.bodies) > 2
    assert all(json.loads(b) == body for b in _InferHandler.bodies)


def test_shm_names_sees_regions_mapped_by_the_group() -> None:
    from multiprocessing import shared_memory

    from bench.servers import shm_names

    region = shared_memory.SharedMemory(create=True, size=4096)
    try:
        assert region.name.lstrip("/") in shm_names(os.getpgid(0))
    finally:
        region.close()
        region.unlink()
