"""Connection management of the native gRPC transport against a real ``tritium serve``:
keepalive pings (``--grpc-keepalive-time``/``-timeout``), connection age
(``--grpc-max-connection-age``) and response compression, seen as raw HTTP/2 frames.
"""

from __future__ import annotations

import socket
import time
import zlib
from pathlib import Path

import numpy as np
from hpack import Decoder, Encoder
from tritonclient.grpc import service_pb2

from tritium.frontends.grpc.native import frames as f
from tritium.testing import ServerProcess

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "model_repository"
ARGS = ["--grpc-implementation=native", "--exit-on-error=false"]


class RawConnection:
    """A client socket that reads whole frames and answers nothing by itself."""

    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=30)
        self.sock.sendall(f.PREFACE + f.settings_frame({}))
        self.buf = b""
        self.encoder = Encoder()
        self.decoder = Decoder()

    def frame(self) -> tuple[int, int, int, bytes] | None:
        """(type, flags, stream, payload) of the next frame; None once the server closed."""
        while True:
            if len(self.buf) >= 9:
                length = int.from_bytes(self.buf[:3], "big")
                if len(self.buf) >= 9 + length:
                    head, payload = self.buf[:9], self.buf[9 : 9 + length]
                    self.buf = self.buf[9 + length :]
                    sid = int.from_bytes(head[5:9], "big") & 0x7FFFFFFF
                    return head[3], head[4], sid, payload
            try:
                chunk = self.sock.recv(65536)
            except ConnectionResetError:
                return None
            if not chunk:
                return None
            self.buf += chunk

    def next_of(self, kind: int) -> tuple[int, int, int, bytes] | None:
        while (frame := self.frame()) is not None:
            if frame[0] == kind and not (kind == f.PING and frame[1] & f.ACK):
                return frame
        return None

    def close(self) -> None:
        self.sock.close()


def test_keepalive_pings_and_an_unanswered_ping_closes_the_connection():
    args = [
        *ARGS,
        "--grpc-keepalive-time=200",
        "--grpc-keepalive-timeout=400",
        "--grpc-keepalive-permit-without-calls=true",
    ]
    with ServerProcess([EXAMPLES], args, grpc=True) as proc:
        answering = RawConnection(proc.grpc_port)
        silent = RawConnection(proc.grpc_port)
        opened = time.monotonic()
        try:
            # A client that acknowledges every ping is pinged again and again.
            for _ in range(4):
                ping = answering.next_of(f.PING)
                assert ping is not None and len(ping[3]) == 8
                answering.sock.sendall(f.ping_frame(ping[3], ack=True))
            # One that does not gets one ping (none more while it is unanswered) and is
            # closed once the timeout has passed: keepalive time + timeout at the earliest.
            pings = 0
            while (frame := silent.frame()) is not None:
                pings += frame[0] == f.PING and not frame[1] & f.ACK
            assert pings == 1
            assert time.monotonic() - opened >= 0.6
            # The answering client is still served.
            assert answering.next_of(f.PING) is not None
        finally:
            answering.close()
            silent.close()


def test_max_connection_age_ends_the_connection_with_goaway():
    args = [*ARGS, "--grpc-max-connection-age=300", "--grpc-max-connection-age-grace=200"]
    with ServerProcess([EXAMPLES], args, grpc=True) as proc:
        conn = RawConnection(proc.grpc_port)
        try:
            opened = time.monotonic()
            goaway = conn.next_of(f.GOAWAY)
            assert goaway is not None
            assert time.monotonic() - opened >= 0.25
            last_stream, code = f.unpack_goaway(goaway[3])
            assert (last_stream, code) == (0, f.NO_ERROR)
            assert conn.frame() is None  # no call in flight: closed right after
        finally:
            conn.close()


def test_infer_responses_are_compressed_when_configured():
    args = [*ARGS, "--grpc-infer-response-compression-level=high"]
    with ServerProcess([EXAMPLES], args, grpc=True) as proc:
        conn = RawConnection(proc.grpc_port)
        try:
            values = np.zeros((1, 3000), np.float32)  # one DATA frame
            request = service_pb2.ModelInferRequest(model_name="identity", id="z")
            request.inputs.add(name="INPUT0", datatype="FP32", shape=list(values.shape))
            request.raw_input_contents.append(values.tobytes())
            body = request.SerializeToString()
            headers = [
                (":method", "POST"),
                (":scheme", "http"),
                (":path", "/inference.GRPCInferenceService/ModelInfer"),
                (":authority", "localhost"),
                ("content-type", "application/grpc"),
                ("te", "trailers"),
                ("grpc-accept-encoding", "identity,deflate,gzip"),
            ]
            conn.sock.sendall(
                f.headers_frames(1, conn.encoder.encode(headers), False, 16_384)
                + f.frame(f.DATA, f.END_STREAM, 1, b"\0" + len(body).to_bytes(4, "big") + body)
            )
            head = conn.next_of(f.HEADERS)
            assert head is not None
            fields = dict(conn.decoder.decode(head[3]))
            assert fields["grpc-encoding"] == "deflate"  # grpc core's choice for "high"
            data = b""
            while (frame := conn.frame()) is not None and frame[0] != f.HEADERS:
                if frame[0] == f.DATA:
                    data += frame[3]
            assert frame is not None and ("grpc-status", "0") in conn.decoder.decode(frame[3])
            assert data[0] == 1  # the compressed flag
            assert int.from_bytes(data[1:5], "big") == len(data) - 5 < values.nbytes // 10
            reply = service_pb2.ModelInferResponse.FromString(zlib.decompress(data[5:]))
            assert reply.id == "z"
            assert reply.raw_output_contents[0] == values.tobytes()
        finally:
            conn.close()
