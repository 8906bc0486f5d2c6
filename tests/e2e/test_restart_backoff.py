"""Crash back-off: an instance killed again and again comes back every time (at once, then
after a doubling wait up to the cap) and is never abandoned; while it waits the repository
index says why and when the next attempt is, and ``/metrics`` counts the restarts. A
restart whose ``initialize`` raises keeps Triton's behaviour (UNAVAILABLE with the reason,
no retry loop) unless ``restart-after-initialize-error=true``."""

from __future__ import annotations

import os
import signal
import time
import urllib.request

import pytest
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from tritium.testing import ServerProcess
from tritium.testing.lifecycle import marked_inputs
from tritium.testing.processes import child_pids

from .test_supervision import _entry, _eventually, _repo


def _kill_worker(server: ServerProcess) -> int:
    assert server.proc is not None
    (pid,) = child_pids(server.proc.pid)
    os.kill(pid, signal.SIGKILL)
    return pid


def _restarts(server: ServerProcess) -> float:
    with urllib.request.urlopen(server.metrics_url, timeout=10) as reply:
        page = reply.read().decode()
    for line in page.splitlines():
        if line.startswith('nv_model_restart_count{model="crashy",version="1"}'):
            return float(line.rsplit(" ", 1)[1])
    raise AssertionError("no nv_model_restart_count for crashy:\n" + page)


def test_ten_kills_in_a_row_leave_the_model_serving(tmp_path):
    repo = _repo(tmp_path, "crashy")
    args = ["--load-model=crashy", "--model-control-mode=explicit"]
    args.append("--backend-config=python,restart-backoff-max-seconds=0.4")
    with ServerProcess([repo], args, metrics=True) as server:
        client = httpclient.InferenceServerClient(server.http_url)
        for _ in range(10):
            _eventually(lambda: client.is_model_ready("crashy"))
            old = _kill_worker(server)
            _eventually(lambda old=old: child_pids(server.proc.pid) not in ([], [old]))
        _eventually(lambda: client.is_model_ready("crashy"))
        assert int(client.infer("crashy", marked_inputs(httpclient, 7)).as_numpy("MARK")[0]) == 7
        assert _entry(client, "crashy") == {"name": "crashy", "version": "1", "state": "READY"}
        assert _restarts(server) == 10
        assert "not restarted again" not in server.log
        client.close()


def test_the_index_shows_the_wait_and_the_next_attempt(tmp_path):
    repo = _repo(tmp_path, "crashy")
    args = ["--load-model=crashy", "--model-control-mode=explicit"]
    args.append("--backend-config=python,restart-backoff-reset-seconds=600")
    with ServerProcess([repo], args, metrics=True) as server:
        client = httpclient.InferenceServerClient(server.http_url)
        for _ in range(3):  # restarted at once, then after 1 s; the third waits 2 s
            _eventually(lambda: client.is_model_ready("crashy"))
            _kill_worker(server)
            time.sleep(0.1)
        entry = _entry(client, "crashy")
        assert entry["state"] == "UNAVAILABLE", entry
        assert "instance 'crashy_0_0' exited unexpectedly; restarted 2 times" in entry["reason"]
        assert "next attempt in " in entry["reason"] and " UTC)" in entry["reason"]
        waited = float(entry["reason"].split("next attempt in ")[1].split(" s")[0])
        assert 1.0 < waited <= 2.0, entry
        assert not client.is_model_ready("crashy")
        assert server.wait_for_log(r"exited unexpectedly; restarting in \d\.\d s")
        _eventually(lambda: client.is_model_ready("crashy"), timeout=10)
        assert _entry(client, "crashy")["state"] == "READY"
        assert _restarts(server) == 3
        client.close()


def test_a_restart_whose_initialize_raises_is_not_retried(tmp_path):
    repo = _repo(tmp_path, "crashy")
    args = ["--load-model=crashy", "--model-control-mode=explicit"]
    with ServerProcess([repo], args) as server:
        client = httpclient.InferenceServerClient(server.http_url)
        with pytest.raises(InferenceServerException):
            client.infer("crashy", marked_inputs(httpclient, -2))  # exits; initialize then raises
        _eventually(lambda: "failed" in _entry(client, "crashy").get("reason", ""))
        entry = _entry(client, "crashy")
        assert entry["state"] == "UNAVAILABLE"
        reason = entry["reason"]
        assert "restart of instance 'crashy_0_0' failed: " in reason
        assert "cannot start again" in reason
        time.sleep(2.0)
        assert server.log.count("restart of instance 'crashy_0_0' failed") == 2  # log + reason
        _eventually(lambda: child_pids(server.proc.pid) == [])
        client.close()


def test_restarts_after_initialize_errors_when_asked_for(tmp_path):
    repo = _repo(tmp_path, "crashy")
    args = ["--load-model=crashy", "--model-control-mode=explicit"]
    args.append("--backend-config=python,restart-after-initialize-error=true")
    with ServerProcess([repo], args) as server:
        client = httpclient.InferenceServerClient(server.http_url)
        with pytest.raises(InferenceServerException):
            client.infer("crashy", marked_inputs(httpclient, -2))
        _eventually(lambda: "cannot start again" in _entry(client, "crashy").get("reason", ""))
        entry = _entry(client, "crashy")
        assert entry["state"] == "UNAVAILABLE" and "next attempt in" in entry["reason"]
        (repo / "crashy" / "no_restart").unlink()  # the cause goes away: it comes back
        _eventually(lambda: client.is_model_ready("crashy"), timeout=20)
        assert int(client.infer("crashy", marked_inputs(httpclient, 5)).as_numpy("MARK")[0]) == 5
        client.close()
