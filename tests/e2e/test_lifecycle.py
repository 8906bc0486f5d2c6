"""Start-up table, exit-on-error, and clean shutdown (no children, no shared memory left)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import tritonclient.http as httpclient

from tritium.testing import ServerProcess
from tritium.testing.processes import child_pids

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "model_repository"
TEST_MODELS = ROOT / "tests" / "models"


def _named_shm(pids: list[int]) -> set[str]:
    """Files under /dev/shm that these processes have mapped or open.

    The server's arenas are memfds, so a server that holds none cannot leave any behind.
    (Comparing /dev/shm before and after would count what other programs on the machine —
    real Triton, perf_analyzer — create and remove meanwhile.)
    """
    found: set[str] = set()
    for pid in pids:
        try:
            with open(f"/proc/{pid}/maps") as f:
                found |= {line.split(None, 5)[-1].rstrip("\n") for line in f if "/dev/shm/" in line}
            for fd in os.listdir(f"/proc/{pid}/fd"):
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
                if target.startswith("/dev/shm/"):
                    found.add(target)
        except OSError:
            continue
    return found


def test_startup_table_and_clean_sigterm_shutdown(tmp_path):
    server = ServerProcess([EXAMPLES]).start()
    try:
        assert "| Model" in server.log and "| Version" in server.log and "| Status" in server.log
        assert server.wait_for_log(r"\| add_sub\s+\| 1\s+\| READY")
        assert server.wait_for_log(r"Started HTTPService at 0\.0\.0\.0:\d+")
        client = httpclient.InferenceServerClient(server.http_url)
        assert client.is_server_ready()
        inp0 = httpclient.InferInput("INPUT0", [4], "FP32")
        inp0.set_data_from_numpy(np.ones(4, np.float32))
        inp1 = httpclient.InferInput("INPUT1", [4], "FP32")
        inp1.set_data_from_numpy(np.ones(4, np.float32))
        client.infer("add_sub", [inp0, inp1])
        client.close()
        workers = child_pids(server.proc.pid)
        assert len(workers) >= 3  # one per instance of the three example models
        assert _named_shm([server.proc.pid, *workers]) == set()
    finally:
        server.signal(signal.SIGTERM)
        code = server.wait(60)
    assert code == 0, server.log[-3000:]
    time.sleep(0.2)
    for pid in workers:
        assert not os.path.exists(f"/proc/{pid}") or _is_zombie(pid), f"worker {pid} survived"


def _is_zombie(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split()[2] == "Z"
    except FileNotFoundError:
        return True


def test_sigint_runs_finalize(tmp_path):
    server = ServerProcess([TEST_MODELS], ["--exit-on-error=false"]).start()
    server.signal(signal.SIGINT)
    assert server.wait(60) == 0
    assert "printer finalized" in server.log


def test_exit_on_error_default_exits_nonzero():
    # tests/models holds a model without versions, so start-up fails by default.
    proc = subprocess.run(
        [sys.executable, "-m", "tritium", "serve", f"--model-repository={TEST_MODELS}",
         "--http-port=0", "--allow-grpc=false", "--allow-metrics=false"],
        capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode != 0
    output = proc.stdout + proc.stderr
    assert "UNAVAILABLE" in output
    assert "failed to load all models" in output


def test_duplicate_model_across_repositories_is_an_error(tmp_path):
    for root in ("a", "b"):
        (tmp_path / root).mkdir()
        (tmp_path / root / "add_sub").symlink_to(EXAMPLES / "add_sub")
    proc = subprocess.run(
        [sys.executable, "-m", "tritium", "serve", f"--model-repository={tmp_path / 'a'}",
         f"--model-repository={tmp_path / 'b'}", "--http-port=0", "--allow-grpc=false"],
        capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode != 0
    assert "add_sub" in proc.stdout + proc.stderr


def test_sigterm_lets_in_flight_requests_finish():
    import threading

    server = ServerProcess([TEST_MODELS], ["--exit-on-error=false"]).start()
    result: dict = {}

    def call():
        client = httpclient.InferenceServerClient(server.http_url, network_timeout=30)
        inp = httpclient.InferInput("MS", [1], "INT32")
        inp.set_data_from_numpy(np.array([800], np.int32))
        try:
            result["pid"] = int(client.infer("sleeper", [inp]).as_numpy("PID")[0])
        except Exception as exc:  # noqa: BLE001 - reported by the assertion below
            result["error"] = exc
        finally:
            client.close()

    thread = threading.Thread(target=call)
    thread.start()
    time.sleep(0.3)  # the request is executing now
    server.signal(signal.SIGTERM)
    thread.join(30)
    assert server.wait(60) == 0
    assert "error" not in result, result.get("error")
    assert result["pid"] > 0


def test_kill_9_of_the_server_takes_workers_down():
    server = ServerProcess([EXAMPLES]).start()
    workers = child_pids(server.proc.pid)
    assert workers
    # Each worker leads a session of its own (its own scheduling group under autogroup),
    # so only PR_SET_PDEATHSIG, not the server's process group, can take it down.
    assert all(os.getsid(pid) == pid != os.getsid(server.proc.pid) for pid in workers)
    server.signal(signal.SIGKILL)
    server.wait(30)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and any(
        os.path.exists(f"/proc/{pid}") and not _is_zombie(pid) for pid in workers
    ):
        time.sleep(0.05)
    alive = [pid for pid in workers if os.path.exists(f"/proc/{pid}") and not _is_zombie(pid)]
    assert alive == []


def test_explicit_model_control_loads_only_named_models():
    with ServerProcess(
        [EXAMPLES], ["--model-control-mode=explicit", "--load-model=add_sub"]
    ) as server:
        client = httpclient.InferenceServerClient(server.http_url)
        try:
            assert client.is_model_ready("add_sub")
            assert not client.is_model_ready("identity")
            assert client.is_server_ready()
        finally:
            client.close()
        assert "| add_sub" in server.log and "| identity" not in server.log


def test_missing_specific_version_is_logged_and_does_not_block_start_up(tmp_path):
    # Triton 2.51: "version 4 is specified for model ..., but the version directory is not
    # present" is logged; versions 1 and 3 load; the server is ready.
    (tmp_path / "versioned_specific").symlink_to(TEST_MODELS / "versioned_specific")
    with ServerProcess([tmp_path]) as server:
        client = httpclient.InferenceServerClient(server.http_url)
        try:
            assert client.is_server_ready()
            assert client.get_model_metadata("versioned_specific")["versions"] == ["1", "3"]
        finally:
            client.close()
        assert "version 4 is specified for model 'versioned_specific', but the version directory is not present" in server.log
        assert not server.wait_for_log(r"\| versioned_specific\s+\| 4", timeout=0.1)
