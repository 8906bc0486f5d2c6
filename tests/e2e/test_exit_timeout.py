"""``--exit-timeout-secs`` is one deadline for the whole shutdown.

Draining both frontends, finalizing the models and stopping the workers share it, so a
server with requests still running exits soon after the timeout (Triton 2.51 exits in
5.1–6.0 s at ``--exit-timeout-secs=5``), with no worker and no shared-memory segment left
behind. The test allows 3 s past the timeout for stopping processes on a loaded machine;
deadlines one after another (twice the timeout) cannot meet that.
"""

from __future__ import annotations

import signal
import threading
import time
from pathlib import Path

import numpy as np
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient

from tritium.testing import ServerProcess
from tritium.testing.processes import child_pids, exited, tritium_shm_entries

ROOT = Path(__file__).resolve().parents[2]
TEST_MODELS = ROOT / "tests" / "models"
EXIT_TIMEOUT_S = 5
#: What stopping the processes may take past the deadline, on two loaded cores.
TEARDOWN_S = 3.0


def _sleep_http(url: str, ms: int, errors: list[BaseException]) -> None:
    client = httpclient.InferenceServerClient(url, network_timeout=120)
    inp = httpclient.InferInput("MS", [1], "INT32")
    inp.set_data_from_numpy(np.array([ms], np.int32))
    try:
        client.infer("sleeper", [inp])
    except BaseException as exc:  # noqa: BLE001 - the server goes away mid-request
        errors.append(exc)


def _sleep_grpc(url: str, ms: int, errors: list[BaseException]) -> None:
    client = grpcclient.InferenceServerClient(url)
    inp = grpcclient.InferInput("MS", [1], "INT32")
    inp.set_data_from_numpy(np.array([ms], np.int32))
    try:
        client.infer("sleeper", [inp], client_timeout=120)
    except BaseException as exc:  # noqa: BLE001
        errors.append(exc)


def test_busy_server_exits_soon_after_the_exit_timeout():
    shm_before = tritium_shm_entries()
    server = ServerProcess(
        [TEST_MODELS],
        [
            "--model-control-mode=explicit",
            "--load-model=sleeper",
            "--load-model=printer",
            f"--exit-timeout-secs={EXIT_TIMEOUT_S}",
            "--log-verbose=1",  # the sleeper says "sleeping <ms> ms" as it starts
        ],
        grpc=True,
    ).start()
    try:
        workers = child_pids(server.proc.pid)
        assert len(workers) >= 4  # three sleeper instances and the printer
        errors: list[BaseException] = []
        clients = [
            threading.Thread(target=_sleep_http, args=(server.http_url, 60_000, errors)),
            threading.Thread(target=_sleep_grpc, args=(server.grpc_url, 60_000, errors)),
        ]
        for thread in clients:
            thread.start()
        # Both requests are inside model.execute once two instances say so.
        deadline = time.monotonic() + 60
        while server.log.count("sleeping 60000 ms") < 2:
            assert time.monotonic() < deadline, server.log[-3000:]
            time.sleep(0.02)
    finally:
        started = time.monotonic()
        server.signal(signal.SIGTERM)
        code = server.wait(60)
        took = time.monotonic() - started
    for thread in clients:
        thread.join(30)
    assert code == 0, server.log[-3000:]
    # It waited for the requests up to the deadline, and not longer.
    assert EXIT_TIMEOUT_S - 0.5 <= took < EXIT_TIMEOUT_S + TEARDOWN_S, f"exit took {took:.2f} s"
    assert len(errors) == 2  # neither 60 s request was allowed to finish
    assert all(exited(pid) for pid in workers), server.log[-3000:]
    assert tritium_shm_entries() - shm_before == set()
    # The idle model was still finalized inside the deadline.
    assert "printer finalized" in server.log
