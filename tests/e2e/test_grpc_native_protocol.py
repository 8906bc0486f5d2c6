"""The native gRPC transport at the HTTP/2 level, against a real ``tritium serve``.

A raw client (``h2`` for the state machine, plain sockets for deliberately broken
frames) checks flow control, CONTINUATION, resets, protocol errors, stream limits,
deadlines, graceful shutdown and TLS with ALPN.
"""

from __future__ import annotations

import shutil
import signal
import socket
import ssl
import subprocess
import time
from pathlib import Path

import h2.config
import h2.connection
import h2.events
import numpy as np
import pytest
from hpack import Decoder, Encoder
from tritonclient.grpc import service_pb2

from tritium.frontends.grpc.native import MAX_CONCURRENT_STREAMS
from tritium.frontends.grpc.native import frames as f
from tritium.testing import ServerProcess

ROOT = Path(__file__).resolve().parents[2]
REPOS = [ROOT / "tests" / "models", ROOT / "examples" / "model_repository"]
ARGS = ["--grpc-implementation=native", "--exit-on-error=false"]
SERVICE = "/inference.GRPCInferenceService/"


@pytest.fixture(scope="module")
def server():
    with ServerProcess(REPOS, ARGS, grpc=True) as proc:
        yield proc


def _framed(message) -> bytes:
    data = message.SerializeToString()
    return b"\0" + len(data).to_bytes(4, "big") + data


def _headers(method: str, extra=()) -> list[tuple[str, str]]:
    return [
        (":method", "POST"),
        (":scheme", "http"),
        (":path", SERVICE + method),
        (":authority", "localhost"),
        ("content-type", "application/grpc"),
        ("te", "trailers"),
        *extra,
    ]


def _identity_request(values: np.ndarray) -> service_pb2.ModelInferRequest:
    request = service_pb2.ModelInferRequest(model_name="identity", id="r")
    request.inputs.add(name="INPUT0", datatype="FP32", shape=list(values.shape))
    request.raw_input_contents.append(values.astype(np.float32).tobytes())
    return request


def _sleeper_request(ms: int) -> service_pb2.ModelInferRequest:
    request = service_pb2.ModelInferRequest(model_name="sleeper")
    request.inputs.add(name="MS", datatype="INT32", shape=[1])
    request.raw_input_contents.append(np.array([ms], np.int32).tobytes())
    return request


class Client:
    """A blocking HTTP/2 client over one socket."""

    def __init__(self, port: int, settings: dict | None = None, context=None) -> None:
        sock = socket.create_connection(("127.0.0.1", port), timeout=30)
        if context is not None:
            sock = context.wrap_socket(sock, server_hostname="localhost")
        self.sock = sock
        config = h2.config.H2Configuration(client_side=True, header_encoding="utf-8")
        self.conn = h2.connection.H2Connection(config)
        self.conn.initiate_connection()
        if settings:
            self.conn.update_settings(settings)
        self.auto_ack = True
        self.results: dict[int, dict] = {}
        self.goaway: h2.events.ConnectionTerminated | None = None
        self.flush()

    def flush(self) -> None:
        data = self.conn.data_to_send()
        if data:
            self.sock.sendall(data)

    def start(self, method: str, body: bytes | None, extra=(), end: bool = True) -> int:
        sid = self.conn.get_next_available_stream_id()
        self.results[sid] = {"headers": None, "data": bytearray(), "trailers": None, "reset": None}
        self.conn.send_headers(sid, _headers(method, extra), end_stream=body is None and end)
        if body is not None:
            self._send_body(sid, body, end)
        self.flush()
        return sid

    def _send_body(self, sid: int, body: bytes, end: bool) -> None:
        view = memoryview(body)
        while True:
            window = min(
                self.conn.local_flow_control_window(sid), self.conn.max_outbound_frame_size
            )
            if window > 0 or not view:
                chunk, view = view[:window], view[window:]
                self.conn.send_data(sid, chunk.tobytes(), end_stream=end and not view)
                if not view:
                    return
            else:
                self.flush()
                self.receive()

    def receive(self) -> list:
        data = self.sock.recv(1 << 20)
        if not data:
            raise EOFError("server closed the connection")
        events = self.conn.receive_data(data)
        for event in events:
            result = self.results.get(getattr(event, "stream_id", None) or 0)
            if isinstance(event, h2.events.ResponseReceived):
                result["headers"] = dict(event.headers)
            elif isinstance(event, h2.events.DataReceived):
                result["data"] += event.data
                if self.auto_ack:
                    self.conn.acknowledge_received_data(
                        event.flow_controlled_length, event.stream_id
                    )
            elif isinstance(event, h2.events.TrailersReceived):
                result["trailers"] = dict(event.headers)
            elif isinstance(event, h2.events.StreamReset):
                result["reset"] = event.error_code
            elif isinstance(event, h2.events.ConnectionTerminated):
                self.goaway = event
        self.flush()
        return events

    def wait(self, sid: int) -> dict:
        result = self.results[sid]
        while result["trailers"] is None and result["reset"] is None:
            if result["headers"] is not None and "grpc-status" in result["headers"]:
                break  # trailers-only
            self.receive()
        return result

    def call(self, method: str, message, extra=()) -> dict:
        return self.wait(self.start(method, _framed(message), extra))

    def close(self) -> None:
        self.sock.close()


def _status(result: dict) -> tuple[str, str]:
    fields = result["trailers"] or result["headers"]
    return fields.get("grpc-status"), fields.get("grpc-message", "")


def _message(result: dict, cls):
    data = bytes(result["data"])
    assert data[0] == 0 and int.from_bytes(data[1:5], "big") == len(data) - 5
    return cls.FromString(data[5:])


def test_unary_call_unknown_method_and_wrong_content_type(server):
    client = Client(server.grpc_port)
    try:
        result = client.call("ServerLive", service_pb2.ServerLiveRequest())
        assert result["headers"][":status"] == "200"
        assert result["headers"]["content-type"] == "application/grpc"
        assert _status(result) == ("0", "")
        assert _message(result, service_pb2.ServerLiveResponse).live
        assert _status(client.call("NoSuchMethod", service_pb2.ServerLiveRequest()))[0] == "12"
        sid = client.start("ServerLive", b"", extra=[])
        client.conn.send_headers(
            client.conn.get_next_available_stream_id(),
            [(k, "text/plain" if k == "content-type" else v) for k, v in _headers("ServerLive")],
            end_stream=True,
        )
        client.flush()
        bad = client.conn.highest_outbound_stream_id
        client.results[bad] = {
            "headers": None,
            "data": bytearray(),
            "trailers": None,
            "reset": None,
        }
        client.wait(sid)
        assert client.wait(bad)["headers"][":status"] == "415"
        # Without a GPU, registering CUDA shared memory answers UNIMPLEMENTED.
        status, text = _status(
            client.call("CudaSharedMemoryRegister", service_pb2.CudaSharedMemoryRegisterRequest())
        )
        assert status == "12" and text
    finally:
        client.close()


def test_response_stops_at_the_client_window_until_window_update(server):
    client = Client(server.grpc_port, settings={f.SETTINGS_INITIAL_WINDOW_SIZE: 1024})
    client.auto_ack = False
    try:
        values = np.arange(16_384, dtype=np.float32).reshape(1, -1)  # 64 KiB of output
        sid = client.start("ModelInfer", _framed(_identity_request(values)))
        result = client.results[sid]
        while len(result["data"]) < 1024:
            client.receive()  # h2 raises if the server overruns the window
        assert len(result["data"]) == 1024 and result["trailers"] is None
        client.auto_ack = True
        client.conn.acknowledge_received_data(1024, sid)
        client.flush()
        client.wait(sid)
        assert _status(result) == ("0", "")
        response = _message(result, service_pb2.ModelInferResponse)
        np.testing.assert_array_equal(
            np.frombuffer(response.raw_output_contents[0], np.float32), values.ravel()
        )
    finally:
        client.close()


def test_headers_in_continuation_frames_and_unknown_frames(server):
    client = Client(server.grpc_port)
    try:
        big = [(f"x-meta-{i}", "v" * 2000) for i in range(12)]  # ~24 KiB: needs CONTINUATION
        result = client.call("ServerReady", service_pb2.ServerReadyRequest(), extra=big)
        assert _status(result) == ("0", "")
        client.sock.sendall(f.frame(0xFA, 0xFF, 0, b"ignore me") + f.frame(0x42, 0, 1, b""))
        assert _status(client.call("ServerLive", service_pb2.ServerLiveRequest())) == ("0", "")
    finally:
        client.close()


def test_client_reset_cancels_the_work(server):
    client = Client(server.grpc_port)
    try:
        request = service_pb2.ModelInferRequest(model_name="cancellable")
        request.inputs.add(name="TAG", datatype="BYTES", shape=[1])
        request.raw_input_contents.append(b"\x07\0\0\0rstnat1")
        sid = client.start("ModelInfer", _framed(request))
        # Reset only once the model runs it (a queued request would just be dropped).
        assert server.wait_for_log(r"cancellable rstnat1 started", timeout=15)
        client.conn.reset_stream(sid, f.CANCEL)
        client.flush()
        assert server.wait_for_log(r"cancellable rstnat1 cancelled=True", timeout=15)
        assert _status(client.call("ServerLive", service_pb2.ServerLiveRequest())) == ("0", "")
    finally:
        client.close()


@pytest.mark.parametrize(
    ("frame", "code"),
    [
        (f.frame(f.DATA, 0, 0, b"x"), f.PROTOCOL_ERROR),
        (
            f.frame(f.HEADERS, f.END_HEADERS | f.END_STREAM, 1, b"\xff\xff\xff\xff"),
            f.COMPRESSION_ERROR,
        ),
        (f.frame(f.SETTINGS, 0, 0, b"\0\0\0"), f.FRAME_SIZE_ERROR),
    ],
)
def test_malformed_frames_close_only_their_connection(server, frame, code):
    other = Client(server.grpc_port)
    try:
        sock = socket.create_connection(("127.0.0.1", server.grpc_port), timeout=30)
        sock.sendall(f.PREFACE + f.settings_frame({}) + frame)
        received = b""
        while chunk := sock.recv(65536):
            received += chunk
        sock.close()
        goaways = [
            received[i + 9 : i + 9 + int.from_bytes(received[i : i + 3], "big")]
            for i in _frame_offsets(received)
            if received[i + 3] == f.GOAWAY
        ]
        assert goaways and int.from_bytes(goaways[0][4:8], "big") == code
        assert _status(other.call("ServerLive", service_pb2.ServerLiveRequest())) == ("0", "")
    finally:
        other.close()


def _frame_offsets(data: bytes):
    i = 0
    while i + 9 <= len(data):
        yield i
        i += 9 + int.from_bytes(data[i : i + 3], "big")


def test_streams_beyond_the_limit_are_refused(server):
    sock = socket.create_connection(("127.0.0.1", server.grpc_port), timeout=30)
    try:
        encoder = Encoder()
        out = [f.PREFACE, f.settings_frame({})]
        for n in range(MAX_CONCURRENT_STREAMS + 1):  # open, never half-closed
            out.append(
                f.headers_frames(2 * n + 1, encoder.encode(_headers("ServerLive")), False, 16384)
            )
        sock.sendall(b"".join(out))
        refused = 2 * MAX_CONCURRENT_STREAMS + 1
        received = b""
        found = None
        while found is None:
            received += sock.recv(65536)
            for i in _frame_offsets(received):
                if received[i + 3] == f.RST_STREAM:
                    sid = int.from_bytes(received[i + 5 : i + 9], "big")
                    found = (sid, int.from_bytes(received[i + 9 : i + 13], "big"))
        assert found == (refused, f.REFUSED_STREAM)
    finally:
        sock.close()


def test_deadline_expiry_answers_deadline_exceeded(server):
    client = Client(server.grpc_port)
    try:
        start = time.monotonic()
        result = client.call("ModelInfer", _sleeper_request(3000), extra=[("grpc-timeout", "300m")])
        assert _status(result) == ("4", "Deadline Exceeded")
        assert time.monotonic() - start < 2.5
    finally:
        client.close()


def test_goaway_on_shutdown_lets_in_flight_calls_finish():
    # Raw frames: h2's client state machine closes on any GOAWAY, even a graceful one.
    with ServerProcess(REPOS, ARGS, grpc=True) as proc:
        sock = socket.create_connection(("127.0.0.1", proc.grpc_port), timeout=30)
        try:
            block = Encoder().encode(_headers("ModelInfer"))
            body = _framed(_sleeper_request(1500))
            sock.sendall(
                f.PREFACE
                + f.settings_frame({})
                + f.headers_frames(1, block, False, 16384)
                + f.frame(f.DATA, f.END_STREAM, 1, body)
            )
            time.sleep(0.3)
            proc.signal(signal.SIGTERM)
            received = b""
            while chunk := sock.recv(65536):
                received += chunk
        finally:
            sock.close()
        assert proc.wait(30) == 0
    frames = [
        (received[i + 3], received[i + 4], int.from_bytes(received[i + 5 : i + 9], "big"),
         received[i + 9 : i + 9 + int.from_bytes(received[i : i + 3], "big")])
        for i in _frame_offsets(received)
    ]  # fmt: skip
    kinds = [(kind, sid) for kind, _, sid, _ in frames if kind != f.WINDOW_UPDATE]
    goaway = next(payload for kind, _, _, payload in frames if kind == f.GOAWAY)
    assert int.from_bytes(goaway[:4], "big") == 1 and int.from_bytes(goaway[4:8], "big") == 0
    # GOAWAY first, then the in-flight call's whole response, ending in status OK.
    assert kinds.index((f.GOAWAY, 0)) < kinds.index((f.HEADERS, 1)) < kinds.index((f.DATA, 1))
    decoder = Decoder()
    blocks = [payload for kind, _, sid, payload in frames if kind == f.HEADERS and sid == 1]
    assert decoder.decode(blocks[0])[0] == (":status", "200")
    assert ("grpc-status", "0") in decoder.decode(blocks[-1])


@pytest.fixture(scope="module")
def certificate(tmp_path_factory):
    if shutil.which("openssl") is None:
        pytest.skip("the openssl command is not installed (Debian/Ubuntu package: openssl)")
    folder = tmp_path_factory.mktemp("tls")
    cert, key = folder / "cert.pem", folder / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
         "-keyout", str(key), "-out", str(cert), "-subj", "/CN=localhost",
         "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1"],
        check=True, capture_output=True,
    )  # fmt: skip
    return cert, key


def test_tls_with_alpn_h2(certificate):
    cert, key = certificate
    args = [*ARGS, "--grpc-use-ssl=true", f"--grpc-server-cert={cert}", f"--grpc-server-key={key}"]
    with ServerProcess(REPOS[1:], args, grpc=True) as proc:
        context = ssl.create_default_context(cafile=str(cert))
        context.set_alpn_protocols(["h2"])
        client = Client(proc.grpc_port, context=context)
        try:
            assert client.sock.selected_alpn_protocol() == "h2"
            assert _status(client.call("ServerLive", service_pb2.ServerLiveRequest())) == ("0", "")
        finally:
            client.close()
        import tritonclient.grpc as grpcclient

        triton = grpcclient.InferenceServerClient(
            f"localhost:{proc.grpc_port}", ssl=True, root_certificates=str(cert)
        )
        try:
            assert triton.is_server_live() and triton.is_model_ready("add_sub")
        finally:
            triton.close()
