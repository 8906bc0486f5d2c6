"""Supervision: with ``restart-limit`` asked for, a model that keeps crashing ends
UNAVAILABLE with the reason instead of restarting forever (the default restarts it with a
back-off and never gives up: ``test_restart_backoff``), an ``initialize`` that hangs past its timeout fails the load, and
requests queued on a model that becomes unavailable fail at once, naming the model."""

from __future__ import annotations

import threading
import time

import pytest
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from tritium.testing import ServerProcess
from tritium.testing.lifecycle import marked_config, marked_inputs
from tritium.testing.processes import child_pids

CRASHY = """
import os
import time
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        self.marker = os.path.join(args["model_repository"], "no_restart")
        if args["model_name"] == "hangs":
            time.sleep(120)
        if os.path.exists(self.marker):
            raise RuntimeError("cannot start again")

    def execute(self, requests):
        out = []
        for r in requests:
            x = int(pb_utils.get_input_tensor_by_name(r, "X").as_numpy()[0])
            if x < 0:
                time.sleep(-x / 1000.0)
                if x == -2:
                    open(self.marker, "w").close()
                os._exit(1)
            out.append(
                pb_utils.InferenceResponse(
                    [
                        pb_utils.Tensor("MARK", np.array([x], np.int32)),
                        pb_utils.Tensor("PID", np.array([os.getpid()], np.int64)),
                    ]
                )
            )
        return out
"""


def _repo(tmp_path, *names):  # noqa: ANN001, ANN202
    for name in names:
        (tmp_path / name / "1").mkdir(parents=True)
        (tmp_path / name / "1" / "model.py").write_text(CRASHY)
        (tmp_path / name / "config.pbtxt").write_text(marked_config(name))
    return tmp_path


def _entry(client, name):  # noqa: ANN001, ANN202
    (entry,) = [m for m in client.get_model_repository_index() if m["name"] == name]
    return entry


def _eventually(check, timeout: float = 30.0) -> None:  # noqa: ANN001
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "condition not reached in time"
        time.sleep(0.05)


def test_a_model_that_keeps_crashing_ends_unavailable_with_the_reason(tmp_path):
    repo = _repo(tmp_path, "crashy")
    args = ["--load-model=crashy", "--model-control-mode=explicit"]
    args.append("--backend-config=python,restart-limit=3")
    with ServerProcess([repo], args) as server:
        client = httpclient.InferenceServerClient(server.http_url)
        for _ in range(3):
            _eventually(
                lambda: (
                    client.is_model_ready("crashy") or _entry(client, "crashy")["state"] != "READY"
                )
            )
            with pytest.raises(InferenceServerException):
                client.infer("crashy", marked_inputs(httpclient, -1))
        _eventually(lambda: _entry(client, "crashy")["state"] == "UNAVAILABLE")
        entry = _entry(client, "crashy")
        assert "failed 3 times within 60 s and is not restarted again" in entry["reason"]
        assert not client.is_model_ready("crashy")
        assert not client.is_server_ready()
        _eventually(lambda: child_pids(server.proc.pid) == [])
        # Loading it again starts afresh.
        client.load_model("crashy")
        assert int(client.infer("crashy", marked_inputs(httpclient, 3)).as_numpy("MARK")[0]) == 3
        client.close()


def test_queued_requests_fail_at_once_naming_the_model(tmp_path):
    repo = _repo(tmp_path, "crashy")
    args = ["--load-model=crashy", "--model-control-mode=explicit"]
    args.append("--backend-config=python,restart-limit=1")
    with ServerProcess([repo], args) as server:
        outcomes: list[tuple[float, str]] = []

        def call(x: int) -> None:
            c = httpclient.InferenceServerClient(server.http_url, network_timeout=60)
            try:
                c.infer("crashy", marked_inputs(httpclient, x))
                outcomes.append((time.monotonic(), "ok"))
            except InferenceServerException as exc:
                outcomes.append((time.monotonic(), str(exc)))
            finally:
                c.close()

        first = threading.Thread(target=call, args=(-1500,))  # runs 1.5 s, then crashes
        first.start()
        time.sleep(0.5)
        queued = [threading.Thread(target=call, args=(0,)) for _ in range(3)]
        for t in queued:
            t.start()
        started = time.monotonic()
        for t in (first, *queued):
            t.join(60)
        texts = sorted(text for _, text in outcomes)
        # Issue 29: the instance is named as everywhere else ('crashy_0_0', not 'crashy:1').
        assert texts[0] == "[503] instance 'crashy_0_0' exited unexpectedly"
        assert (
            texts[1:]
            == [
                "[503] model 'crashy' version 1 is unavailable: instance 'crashy_0_0' failed 1 "
                "time within 60 s and is not restarted again"
            ]
            * 3
        )
        # The three queued ones fail together with the crash, not after some timeout.
        assert max(at for at, _ in outcomes) - started < 5.0


def test_initialize_that_hangs_past_the_timeout_fails_the_load(tmp_path):
    repo = _repo(tmp_path, "hangs")
    args = ["--model-control-mode=explicit"]
    args.append("--backend-config=python,initialize-timeout-seconds=2")
    with ServerProcess([repo], args) as server:
        client = httpclient.InferenceServerClient(server.http_url, network_timeout=120)
        started = time.monotonic()
        with pytest.raises(InferenceServerException) as info:
            client.load_model("hangs")
        assert time.monotonic() - started < 30
        assert "initialize() of 'hangs_0_0' did not finish within 2 s" in str(info.value)
        entry = _entry(client, "hangs")
        assert entry["state"] == "UNAVAILABLE" and "did not finish within 2 s" in entry["reason"]
        _eventually(lambda: child_pids(server.proc.pid) == [])
        client.close()


def test_restarts_that_keep_failing_count_towards_the_limit(tmp_path):
    repo = _repo(tmp_path, "crashy")
    args = ["--load-model=crashy", "--model-control-mode=explicit"]
    args.append("--backend-config=python,restart-limit=3")
    with ServerProcess([repo], args) as server:
        client = httpclient.InferenceServerClient(server.http_url)
        with pytest.raises(InferenceServerException):
            client.infer("crashy", marked_inputs(httpclient, -2))  # exits; restarts then fail
        # UNAVAILABLE while it waits for a restart too: wait for the reason it gave up.
        _eventually(lambda: "not restarted again" in _entry(client, "crashy").get("reason", ""))
        assert _entry(client, "crashy")["state"] == "UNAVAILABLE"
        assert "failed 3 times within 60 s" in _entry(client, "crashy")["reason"]
        assert server.wait_for_log("restart of instance 'crashy_0_0' failed: .*cannot start again")
        _eventually(lambda: child_pids(server.proc.pid) == [])
        client.close()
