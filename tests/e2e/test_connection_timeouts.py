"""Connection timeouts against a real ``tritium serve`` (Triton 2.51 has none: idle,
dribbling and stalled-body sockets stay open there until the descriptor limit).

With 1 s limits: idle keep-alive sockets are closed quietly, a head dribbled a byte at a
time and a body that stops arriving are answered 408 and closed, an HTTP/2 connection
with no stream gets GOAWAY and is closed; the real clients reconnect without an error.
A request line without an HTTP version is answered 400.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient

from tritium.frontends.grpc.native import frames as f
from tritium.testing import ServerProcess

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "model_repository"
SOCKETS = 40  # of each kind
LIMITS = [
    "--http-keep-alive-timeout-secs=1",
    "--http-header-timeout-secs=1",
    "--http-body-timeout-secs=1",
    "--grpc-idle-timeout-secs=1",
]


@pytest.fixture(scope="module", params=["native", "grpcio"])
def server(request: pytest.FixtureRequest) -> Iterator[ServerProcess]:
    args = [f"--grpc-implementation={request.param}", *LIMITS]
    with ServerProcess([EXAMPLES], args, grpc=True) as running:
        yield running


def _connect(port: int) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=30)
    return sock


def _read_until_closed(sock: socket.socket, deadline: float) -> bytes | None:
    """Everything the server sends until it closes; None if still open at ``deadline``."""
    data = b""
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            return None
        sock.settimeout(left)
        try:
            chunk = sock.recv(65536)
        except TimeoutError:
            return None
        except ConnectionResetError:
            return data
        if not chunk:
            return data
        data += chunk


def test_idle_dribbling_and_stalled_http_sockets_are_closed(server: ServerProcess) -> None:
    idle = [_connect(server.port) for _ in range(SOCKETS)]
    dribbling = [_connect(server.port) for _ in range(SOCKETS)]
    stalled = [_connect(server.port) for _ in range(SOCKETS)]
    for sock in dribbling:
        sock.sendall(b"GET /v2/health/live HTTP/1.1\r\n")
    for sock in stalled:
        sock.sendall(
            b"POST /v2/models/add_sub/infer HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{"
        )
    # Dribble a header line every 0.3 s: the head's own clock keeps running.
    started = time.monotonic()
    while time.monotonic() - started < 2.5:
        for sock in dribbling:
            try:
                sock.sendall(b"X-A: b\r\n")
            except OSError:
                pass
        time.sleep(0.3)
    deadline = time.monotonic() + 10
    try:
        for sock in idle:
            assert _read_until_closed(sock, deadline) == b""
        for sock in dribbling + stalled:
            answer = _read_until_closed(sock, deadline)
            assert answer is not None, "socket still open"
            assert answer.startswith(b"HTTP/1.1 408 Request Timeout\r\n"), answer[:80]
    finally:
        for sock in idle + dribbling + stalled:
            sock.close()


def test_http_client_reconnects_after_an_idle_close(server: ServerProcess) -> None:
    client = httpclient.InferenceServerClient(server.http_url)
    try:
        assert client.is_server_live()
        time.sleep(2.5)  # the pooled connection is closed meanwhile
        assert client.is_server_live()
    finally:
        client.close()


def test_request_line_without_version_is_400(server: ServerProcess) -> None:
    with _connect(server.port) as sock:
        sock.sendall(b"GET /v2/health/live\r\n\r\n")
        answer = _read_until_closed(sock, time.monotonic() + 10)
    assert answer is not None and answer.startswith(b"HTTP/1.1 400 Bad Request\r\n"), answer


def test_idle_http2_connection_gets_goaway(server: ServerProcess) -> None:
    with _connect(server.grpc_port) as sock:
        sock.sendall(f.PREFACE + f.settings_frame({}))
        answer = _read_until_closed(sock, time.monotonic() + 10)
    assert answer is not None, "HTTP/2 connection still open"
    kinds = []
    while len(answer) >= 9:
        length = int.from_bytes(answer[:3], "big")
        kinds.append(answer[3])
        answer = answer[9 + length :]
    assert f.GOAWAY in kinds


def test_grpc_client_reconnects_after_an_idle_close(server: ServerProcess) -> None:
    client = grpcclient.InferenceServerClient(server.grpc_url)
    try:
        assert client.is_server_live()
        time.sleep(2.5)
        assert client.is_server_live()
        assert client.is_model_ready("add_sub")
    finally:
        client.close()
