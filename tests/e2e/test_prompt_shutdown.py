"""Shutdown waits only for requests in flight, logs Triton's countdown, and stops at once on
a second signal; ``--drain-delay-secs`` answers not-ready while still serving.

An idle gRPC stream (or an idle keep-alive connection) is closed at once (GOAWAY, the
stream ended UNAVAILABLE), so a server holding one stops in well under the default 30 s
exit timeout; a stream with a request outstanding counts as in flight until its response
is out. The countdown texts are Triton's (``server.cc``). A second SIGINT/SIGTERM cuts the
wait short and exits 1, Triton's status when its stop does not finish gracefully. Every
test ends with no worker process and no shared-memory entry left behind.

CI runs on two loaded cores, so no test guesses how long something takes: a request is
known to be inside ``execute`` from the sleeper's verbose line, and the time bounds are far
from what a regression would take (the 30 s default exit timeout, a 60 s request) rather
than close to what an idle machine does.
"""

from __future__ import annotations

import queue
import re
import signal
import socket
import threading
import time
from pathlib import Path

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient

from tritium.testing import ServerProcess
from tritium.testing.processes import child_pids, exited, tritium_shm_entries

ROOT = Path(__file__).resolve().parents[2]
TEST_MODELS = ROOT / "tests" / "models"
TRANSPORTS = ["native", "grpcio"]
#: Half the default exit timeout: a shutdown that waits for it cannot meet this bound.
NOT_HELD_S = 15.0


def _sleeper_server(*extra: str) -> ServerProcess:
    # --log-verbose: the sleeper says "sleeping <ms> ms" as a request enters execute.
    return ServerProcess(
        [TEST_MODELS],
        ["--model-control-mode=explicit", "--load-model=sleeper", "--log-verbose=1", *extra],
        grpc=True,
    ).start()


def _wait_executing(server: ServerProcess, ms: int, count: int = 1) -> None:
    """Until ``count`` requests of ``ms`` are inside the sleeper's execute."""
    line = f"sleeping {ms} ms"
    deadline = time.monotonic() + 60
    while server.log.count(line) < count:
        assert time.monotonic() < deadline, server.log[-3000:]
        time.sleep(0.02)


def _grpc_sleep(ms: int) -> grpcclient.InferInput:
    inp = grpcclient.InferInput("MS", [1], "INT32")
    inp.set_data_from_numpy(np.array([ms], np.int32))
    return inp


def _http_sleep(ms: int) -> httpclient.InferInput:
    inp = httpclient.InferInput("MS", [1], "INT32")
    inp.set_data_from_numpy(np.array([ms], np.int32))
    return inp


def _stop_and_time(server: ServerProcess, timeout: float = 60) -> tuple[int, float]:
    started = time.monotonic()
    server.signal(signal.SIGTERM)
    code = server.wait(timeout)
    return code, time.monotonic() - started


def _assert_nothing_left(workers: list[int], shm_before: set[str], log: str) -> None:
    assert workers and all(exited(pid) for pid in workers), log[-3000:]
    assert tritium_shm_entries() - shm_before == set()


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_idle_grpc_stream_and_idle_connections_do_not_hold_shutdown(transport):
    """Default exit timeout (30 s): an idle open stream, an idle gRPC connection and an
    idle HTTP keep-alive connection are closed at once: the stream ends within 5 s of
    SIGTERM, and the server exits well before the exit timeout."""
    shm_before = tritium_shm_entries()
    server = _sleeper_server(f"--grpc-implementation={transport}")
    replies: queue.Queue = queue.Queue()
    stream_client = grpcclient.InferenceServerClient(server.grpc_url)
    idle_client = grpcclient.InferenceServerClient(server.grpc_url)
    http_idle = httpclient.InferenceServerClient(server.http_url)
    try:
        workers = child_pids(server.proc.pid)
        stream_client.start_stream(
            callback=lambda result, error: replies.put((result, error, time.monotonic()))
        )
        stream_client.async_stream_infer("sleeper", [_grpc_sleep(10)])
        result, error, _ = replies.get(timeout=30)
        assert error is None, error
        assert idle_client.is_server_ready()  # an open, idle gRPC connection
        assert http_idle.is_server_ready()  # an idle keep-alive connection
        time.sleep(0.2)
    finally:
        signalled = time.monotonic()
        code, took = _stop_and_time(server)
    try:
        assert code == 0, server.log[-3000:]
        assert took < NOT_HELD_S, f"shutdown took {took:.1f} s with an idle stream open"
        # The stream was ended by the server, as unavailable: the client may go elsewhere.
        _, error, ended = replies.get(timeout=10)
        assert error is not None and "StatusCode.UNAVAILABLE" in str(error.status())
        assert ended - signalled < 5.0, f"the idle stream ended {ended - signalled:.1f} s late"
        _assert_nothing_left(workers, shm_before, server.log)
    finally:
        stream_client.stop_stream(cancel_requests=True)
        stream_client.close()
        idle_client.close()
        http_idle.close()


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_stream_with_a_request_outstanding_is_in_flight_until_answered(transport):
    server = _sleeper_server(f"--grpc-implementation={transport}")
    replies: queue.Queue = queue.Queue()
    client = grpcclient.InferenceServerClient(server.grpc_url)
    try:
        client.start_stream(callback=lambda result, error: replies.put((result, error)))
        client.async_stream_infer("sleeper", [_grpc_sleep(2000)])
        _wait_executing(server, 2000)
    finally:
        code, took = _stop_and_time(server)
    try:
        assert code == 0, server.log[-3000:]
        result, error = replies.get(timeout=10)
        assert error is None, error  # the outstanding request was answered
        assert int(result.as_numpy("PID")[0]) > 0
        _, error = replies.get(timeout=10)  # then the stream ended
        assert error is not None and "StatusCode.UNAVAILABLE" in str(error.status())
        assert took < NOT_HELD_S, f"{took:.1f} s"
    finally:
        client.stop_stream(cancel_requests=True)
        client.close()


def test_countdown_lines_while_a_request_is_in_flight():
    server = _sleeper_server()
    result: dict = {}

    def call() -> None:
        client = httpclient.InferenceServerClient(server.http_url, network_timeout=60)
        try:
            result["pid"] = int(client.infer("sleeper", [_http_sleep(4000)]).as_numpy("PID")[0])
        except Exception as exc:  # noqa: BLE001 - reported by the assertion below
            result["error"] = exc
        finally:
            client.close()

    thread = threading.Thread(target=call)
    thread.start()
    try:
        _wait_executing(server, 4000)
    finally:
        code, _ = _stop_and_time(server)
    thread.join(30)
    assert code == 0, server.log[-3000:]
    assert "error" not in result, result.get("error")
    log = server.log
    assert "Waiting for in-flight requests to complete." in log
    # Once a second while the request runs (most of its 4 s left): Triton's text, counting
    # down from the 30 s exit timeout.
    busy = [line for line in log.splitlines() if "model versions that have in-flight" in line]
    assert len(busy) >= 2, log[-3000:]
    first = re.search(r"Timeout (\d+): Found 1 model versions that have in-flight inferences", busy[0])
    assert first and int(first.group(1)) in (29, 30), busy[0]
    assert "All models are stopped, unloading models" in log
    assert server.wait_for_log(
        r"Timeout \d+: Found \d+ live models and 0 in-flight non-inference requests", 1
    )
    # The lines come in Triton's order.
    assert log.index("Waiting for in-flight") < log.index("All models are stopped")


def test_a_second_signal_stops_at_once():
    shm_before = tritium_shm_entries()
    server = _sleeper_server()
    errors: list[BaseException] = []

    def call() -> None:
        client = httpclient.InferenceServerClient(server.http_url, network_timeout=120)
        try:
            client.infer("sleeper", [_http_sleep(60_000)])
        except BaseException as exc:  # noqa: BLE001 - the server goes away mid-request
            errors.append(exc)
        finally:
            client.close()

    workers = child_pids(server.proc.pid)
    thread = threading.Thread(target=call)
    thread.start()
    try:
        _wait_executing(server, 60_000)
        server.signal(signal.SIGTERM)
        assert server.wait_for_log(r"Waiting for in-flight requests to complete\.", 60)
        started = time.monotonic()
        server.signal(signal.SIGINT)
        code = server.wait(30)
        took = time.monotonic() - started
    finally:
        if server.proc.poll() is None:
            server.stop()
    thread.join(30)
    assert code == 1, server.log[-3000:]
    # Waiting on would take the 30 s exit timeout (or the 60 s request).
    assert took < NOT_HELD_S, f"a second signal took {took:.1f} s to stop the server"
    assert "Signal (2) received again: stopping now" in server.log
    assert len(errors) == 1  # the 60 s request was cut short
    _assert_nothing_left(workers, shm_before, server.log)


def _ready_http(url: str) -> int:
    host, port = url.split(":")
    with socket.create_connection((host, int(port)), timeout=30) as sock:
        sock.sendall(b"GET /v2/health/ready HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        head = sock.recv(4096)
    return int(head.split(b" ", 2)[1])


def _read_until_closed(sock: socket.socket) -> bytes:
    data = b""
    while chunk := sock.recv(4096):
        data += chunk
    return data


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_drain_delay_answers_not_ready_while_serving_then_stops(transport):
    # Long enough for the checks inside the window on a loaded machine (about 1 s idle).
    delay = 6
    shm_before = tritium_shm_entries()
    server = _sleeper_server(f"--drain-delay-secs={delay}", f"--grpc-implementation={transport}")
    workers = child_pids(server.proc.pid)
    grpc_kept = grpcclient.InferenceServerClient(server.grpc_url)
    try:
        assert _ready_http(server.http_url) == 200
        assert grpc_kept.is_server_ready()
        host, port = server.http_url.split(":")
        kept_http = socket.create_connection((host, int(port)), timeout=30)
        kept_http.sendall(b"GET /v2/health/live HTTP/1.1\r\nHost: x\r\n\r\n")
        assert kept_http.recv(4096).startswith(b"HTTP/1.1 200")  # answered before
        started = time.monotonic()
        server.signal(signal.SIGTERM)
        assert server.wait_for_log(r"Draining: the server answers not-ready", 30)
        # Not ready at once, on both endpoints...
        assert _ready_http(server.http_url) == 400  # Triton's not-ready status
        # ...and a kept-alive HTTP connection is answered, then closed (the client
        # reconnects through its balancer rather than staying on this server).
        kept_http.sendall(b"GET /v2/health/live HTTP/1.1\r\nHost: x\r\n\r\n")
        answer = _read_until_closed(kept_http)
        assert answer.startswith(b"HTTP/1.1 200") and b"Connection: close" in answer
        assert not grpc_kept.is_server_ready()
        # ...while inference is still served: on an open connection and on new ones.
        assert int(grpc_kept.infer("sleeper", [_grpc_sleep(10)]).as_numpy("PID")[0]) > 0
        fresh_grpc = grpcclient.InferenceServerClient(server.grpc_url)
        assert int(fresh_grpc.infer("sleeper", [_grpc_sleep(10)]).as_numpy("PID")[0]) > 0
        fresh_grpc.close()
        fresh_http = httpclient.InferenceServerClient(server.http_url)
        assert int(fresh_http.infer("sleeper", [_http_sleep(10)]).as_numpy("PID")[0]) > 0
        fresh_http.close()
        left = delay - (time.monotonic() - started)
        assert left > 1.0, f"the checks took {delay - left:.1f} s of the {delay} s window"
        # A request in flight when the window ends still finishes: it runs until 1.5 s
        # after the window's end.
        result: dict = {}
        late_ms = int((left + 1.5) * 1000)

        def late_call() -> None:
            client = httpclient.InferenceServerClient(server.http_url, network_timeout=60)
            try:
                answer = client.infer("sleeper", [_http_sleep(late_ms)])
                result["pid"] = int(answer.as_numpy("PID")[0])
            except Exception as exc:  # noqa: BLE001 - reported by the assertion below
                result["error"] = exc
            finally:
                client.close()

        thread = threading.Thread(target=late_call)
        thread.start()
        code = server.wait(60)
        took = time.monotonic() - started
        thread.join(30)
    finally:
        if server.proc.poll() is None:
            server.stop()
        grpc_kept.close()
        kept_http.close()
    assert code == 0, server.log[-3000:]
    assert "error" not in result, result.get("error")
    assert delay + 1.0 <= took < delay + NOT_HELD_S, f"{took:.1f} s"
    # New connections are refused once the window is over.
    with pytest.raises(OSError):
        _ready_http(server.http_url)
    _assert_nothing_left(workers, shm_before, server.log)
