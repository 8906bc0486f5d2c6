"""The chaos tool stops its server on every way out: interrupted (Ctrl-C) or terminated
(``kill``, ``timeout``, a cancelled CI job) in the middle of a run, no ``tritium serve`` and
none of its workers is left running."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tritium.testing.processes import child_pids, exited

CHAOS = Path(__file__).resolve().parents[1] / "chaos.py"


def _server_and_workers(tool: int, timeout: float = 60.0) -> list[int]:
    """The tool's server and the server's workers, once the workers are up."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for pid in child_pids(tool):
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    serving = b"serve" in f.read()
            except OSError:
                continue
            workers = child_pids(pid)
            if serving and len(workers) >= 6:
                return [pid, *workers]
        time.sleep(0.2)
    raise AssertionError("the chaos tool's server did not start its workers in time")


@pytest.mark.timeout(180)
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_signal_in_the_middle_of_a_run_leaves_no_server(sig: int, tmp_path: Path) -> None:
    tool = subprocess.Popen(
        [sys.executable, str(CHAOS), "--seconds", "120", "--results", str(tmp_path)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        processes = _server_and_workers(tool.pid)
        time.sleep(2.0)  # load and faults under way
        tool.send_signal(sig)
        code = tool.wait(90)
    finally:
        if tool.poll() is None:
            tool.kill()
            tool.wait(10)
    assert code != 0  # an interrupted run does not pass
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and not all(exited(p) for p in processes):
        time.sleep(0.1)
    left = [p for p in processes if not exited(p)]
    assert not left, f"left running after {signal.Signals(sig).name}: {left}"
