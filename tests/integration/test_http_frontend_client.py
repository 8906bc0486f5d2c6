"""The HTTP frontend on a real socket, driven by the real ``tritonclient.http`` client and
by raw sockets, against a small in-test service (identity models).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import struct
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass

import ml_dtypes
import numpy as np
import pytest
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from tritium.core.errors import NotFound, Unavailable
from tritium.core.types import InferRequest, InferResponse, OutputTensor
from tritium.frontends.http import HttpServer, start_http_server

try:
    import uvloop
except ImportError:  # pragma: no cover - uvloop is a dependency
    uvloop = None


# ---------------------------------------------------------------- the service


def _config(max_batch_size: int, inputs: list[tuple[str, str, list[int]]]) -> dict:
    return {
        "max_batch_size": max_batch_size,
        "input": [{"name": n, "data_type": t, "dims": d} for n, t, d in inputs],
        "output": [],
    }


MODELS = {
    # echoes INPUT<i> as OUTPUT<i>, any types and shapes
    "identity": _config(0, [("INPUT0", "TYPE_FP32", [-1])]),
    "identity_batched": _config(8, [("INPUT0", "TYPE_INT32", [3])]),
    "bytes_raw": _config(0, [("INPUT0", "TYPE_STRING", [1])]),
    # waits INPUT0[0] milliseconds, then echoes
    "slow": _config(0, [("INPUT0", "TYPE_INT32", [1])]),
    # always answers with an error response
    "broken": _config(0, [("INPUT0", "TYPE_FP32", [-1])]),
}


class IdentityService:
    def __init__(self) -> None:
        self.requests: list[InferRequest] = []
        self.started = 0

    def live(self) -> bool:
        return True

    def ready(self) -> bool:
        return True

    def server_metadata(self) -> dict:
        return {"name": "tritium", "version": "0.1.0", "extensions": ["binary_tensor_data"]}

    def _model(self, name: str, version: str) -> dict:
        if name not in MODELS:
            raise NotFound(f"Request for unknown model: '{name}' is not found")
        if version not in ("", "1"):
            raise NotFound(f"Request for unknown model: '{name}' version {version} is not found")
        return MODELS[name]

    def model_ready(self, name: str, version: str) -> bool:
        self._model(name, version)
        return True

    def model_metadata(self, name: str, version: str) -> dict:
        self._model(name, version)
        return {"name": name, "versions": ["1"], "platform": "python", "inputs": [], "outputs": []}

    def model_config(self, name: str, version: str) -> dict:
        return {"name": name, **self._model(name, version)}

    def submit(self, request: InferRequest) -> asyncio.Future:
        return asyncio.ensure_future(self.infer(request))

    async def infer(self, request: InferRequest) -> InferResponse:
        self._model(request.model_name, request.model_version)
        self.requests.append(request)
        self.started += 1
        if request.model_name == "broken":
            return InferResponse("broken", "1", error=Unavailable("model 'broken' is not ready"))
        if request.model_name == "slow":
            await asyncio.sleep(int(request.inputs[0].data.reshape(-1)[0]) / 1000)
        outputs = [
            OutputTensor(f"OUTPUT{t.name[5:]}", t.datatype, t.shape, t.data) for t in request.inputs
        ]
        if request.outputs is not None:
            wanted = {o.name for o in request.outputs}
            outputs = [o for o in outputs if o.name in wanted]
        params = {"echo": request.parameters["echo"]} if "echo" in request.parameters else {}
        return InferResponse(request.model_name, "1", request.id, outputs, params)


# ------------------------------------------------------------------ the server


@dataclass
class Running:
    url: str
    port: int
    server: HttpServer
    service: IdentityService
    loop: asyncio.AbstractEventLoop

    def call(self, coro, timeout: float = 30.0):
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)


@contextlib.contextmanager
def serve(max_input_size: int = 64 * 2**20) -> Iterator[Running]:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    loop = uvloop.new_event_loop() if uvloop is not None else asyncio.new_event_loop()
    service = IdentityService()
    ready = threading.Event()
    box: dict = {}

    def main() -> None:
        asyncio.set_event_loop(loop)
        box["server"] = loop.run_until_complete(
            start_http_server(service, sock=sock, max_input_size=max_input_size)
        )
        ready.set()
        loop.run_forever()

    thread = threading.Thread(target=main, daemon=True)
    thread.start()
    assert ready.wait(10), "server did not start"
    running = Running(f"127.0.0.1:{port}", port, box["server"], service, loop)
    try:
        yield running
    finally:
        try:
            running.call(running.server.shutdown(5))
        finally:
            loop.call_soon_threadsafe(loop.stop)
            thread.join(10)
            loop.close()


@pytest.fixture(scope="module")
def srv() -> Iterator[Running]:
    with serve() as running:
        yield running


@pytest.fixture
def client(srv: Running) -> Iterator[httpclient.InferenceServerClient]:
    c = httpclient.InferenceServerClient(srv.url, concurrency=4)
    yield c
    c.close()


def raw_exchange(port: int, data: bytes, expect: int, timeout: float = 10.0) -> list[tuple]:
    """Send raw bytes, read ``expect`` responses: (status, headers, body)."""
    out = []
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(data)
        buf = b""
        while len(out) < expect:
            while b"\r\n\r\n" not in buf:
                chunk = s.recv(65536)
                assert chunk, f"connection closed after {len(out)} responses"
                buf += chunk
            head, _, buf = buf.partition(b"\r\n\r\n")
            lines = head.decode("latin-1").split("\r\n")
            headers = {k.lower(): v for k, _, v in (line.partition(": ") for line in lines[1:])}
            size = int(headers["content-length"])
            while len(buf) < size:
                chunk = s.recv(65536)
                assert chunk
                buf += chunk
            out.append((int(lines[0].split()[1]), headers, buf[:size]))
            buf = buf[size:]
    return out


# ------------------------------------------------------------- health & metadata


def test_health_and_metadata(client):
    assert client.is_server_live() and client.is_server_ready()
    assert client.get_server_metadata()["name"] == "tritium"
    assert client.is_model_ready("identity")
    assert client.is_model_ready("identity", "1")
    assert not client.is_model_ready("nope")
    assert client.get_model_metadata("identity")["name"] == "identity"
    assert client.get_model_config("identity_batched")["max_batch_size"] == 8
    with pytest.raises(InferenceServerException) as info:
        client.get_model_metadata("nope")
    assert info.value.status() == "404"
    assert info.value.message() == "Request for unknown model: 'nope' is not found"


# --------------------------------------------------------------------- infer

BINARY_CASES = [
    ("BOOL", np.array([[True, False, True]])),
    ("INT8", np.array([-128, 0, 127], np.int8)),
    ("INT16", np.array([-32768, 32767], np.int16)),
    ("INT32", np.arange(6, dtype=np.int32).reshape(2, 3)),
    ("INT64", np.array([-(2**63), 2**63 - 1], np.int64)),
    ("UINT8", np.array([0, 255], np.uint8)),
    ("UINT16", np.array([0, 65535], np.uint16)),
    ("UINT32", np.array([0, 2**32 - 1], np.uint32)),
    ("UINT64", np.array([0, 2**64 - 1], np.uint64)),
    ("FP16", np.array([1.5, -2.25, 65504], np.float16)),
    ("FP32", np.array([0.1, -1e30, 3.5], np.float32)),
    ("FP64", np.array([1e-300, 0.1], np.float64)),
    ("BF16", np.array([1.0, -2.5, 0.15625], ml_dtypes.bfloat16)),
    ("BYTES", np.array([b"\xff\x00raw", "\u00e9t\u00e9".encode(), b""], dtype=np.object_)),
]


def _infer(client, datatype, array, binary_in, binary_out, model="identity", **kw):
    inp = httpclient.InferInput("INPUT0", list(array.shape), datatype)
    inp.set_data_from_numpy(array, binary_data=binary_in)
    outputs = [httpclient.InferRequestedOutput("OUTPUT0", binary_data=binary_out)]
    return client.infer(model, [inp], outputs=outputs, **kw)


@pytest.mark.parametrize("datatype,array", BINARY_CASES, ids=[c[0] for c in BINARY_CASES])
def test_binary_round_trip_every_datatype(client, datatype, array):
    result = _infer(client, datatype, array, binary_in=True, binary_out=True)
    got = result.as_numpy("OUTPUT0")
    assert got.shape == array.shape
    if datatype == "BYTES":
        assert list(got.reshape(-1)) == list(array.reshape(-1))
    else:
        assert got.dtype == array.dtype
        assert got.tobytes() == array.tobytes()


JSON_CASES = [c for c in BINARY_CASES if c[0] not in ("FP16", "BF16")]
JSON_CASES[-1] = ("BYTES", np.array([b"plain", "\u00e9t\u00e9".encode(), b""], dtype=np.object_))


@pytest.mark.parametrize("datatype,array", JSON_CASES, ids=[c[0] for c in JSON_CASES])
def test_json_round_trip(client, datatype, array):
    result = _infer(client, datatype, array, binary_in=False, binary_out=False)
    got = result.as_numpy("OUTPUT0")
    assert got.shape == array.shape
    if datatype == "BYTES":
        # tritonclient hands JSON strings back as str
        assert list(got.reshape(-1)) == [b.decode() for b in array.reshape(-1)]
    else:
        np.testing.assert_array_equal(got, array)


def test_fp16_json_output_is_refused_like_triton(client):
    with pytest.raises(InferenceServerException) as info:
        _infer(client, "FP16", np.array([1.0], np.float16), binary_in=True, binary_out=False)
    assert info.value.status() == "400"
    assert "sending FP16 data via JSON is not supported" in info.value.message()


def test_request_fields_reach_the_service(srv, client):
    inp = httpclient.InferInput("INPUT0", [1], "FP32")
    inp.set_data_from_numpy(np.array([1], np.float32))
    result = client.infer(
        "identity",
        [inp],
        request_id="req-1",
        sequence_id=77,
        sequence_start=True,
        priority=2,
        timeout=5000,
        parameters={"echo": "hello", "n": 3},
    )
    assert result.get_response()["id"] == "req-1"
    assert result.get_response()["parameters"] == {"echo": "hello"}
    seen = srv.service.requests[-1]
    assert (seen.id, seen.correlation_id, seen.flags) == ("req-1", 77, 1)
    assert (seen.priority, seen.timeout_us) == (2, 5000)
    assert seen.parameters == {"echo": "hello", "n": 3}
    assert seen.outputs is None


def test_version_in_the_url_and_unknown_model(client):
    _infer(client, "FP32", np.ones(2, np.float32), True, True, model_version="1")
    with pytest.raises(InferenceServerException) as info:
        _infer(client, "FP32", np.ones(2, np.float32), True, True, model="nope")
    assert info.value.status() == "404"
    assert info.value.message() == "Request for unknown model: 'nope' is not found"


def test_error_response_maps_its_code(client):
    with pytest.raises(InferenceServerException) as info:
        _infer(client, "FP32", np.ones(2, np.float32), True, True, model="broken")
    assert info.value.status() == "503"
    assert info.value.message() == "model 'broken' is not ready"


@pytest.mark.parametrize("algorithm", ["gzip", "deflate"])
def test_compressed_requests_and_responses(client, algorithm):
    array = np.arange(1000, dtype=np.float32)
    result = _infer(
        client,
        "FP32",
        array,
        True,
        True,
        request_compression_algorithm=algorithm,
        response_compression_algorithm=algorithm,
    )
    np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), array)


def test_large_tensor(client):
    array = np.random.default_rng(0).random(2_000_000, dtype=np.float32)  # 8 MB
    result = _infer(client, "FP32", array, True, True)
    np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), array)


def test_concurrent_async_infer(client):
    pending = []
    for i in range(32):
        inp = httpclient.InferInput("INPUT0", [2], "INT32")
        inp.set_data_from_numpy(np.array([i, -i], np.int32))
        pending.append(client.async_infer("identity", [inp], request_id=str(i)))
    for i, p in enumerate(pending):
        result = p.get_result()
        assert result.get_response()["id"] == str(i)
        assert result.as_numpy("OUTPUT0").tolist() == [i, -i]


def test_aio_client(srv):
    import tritonclient.http.aio as aioclient

    async def scenario():
        c = aioclient.InferenceServerClient(srv.url)
        try:
            assert await c.is_server_live()
            inp = aioclient.InferInput("INPUT0", [3], "BYTES")
            inp.set_data_from_numpy(np.array([b"a", b"bc", b""], dtype=np.object_))
            result = await c.infer("identity", [inp])
            return list(result.as_numpy("OUTPUT0"))
        finally:
            await c.close()

    assert asyncio.run(scenario()) == [b"a", b"bc", b""]


# ------------------------------------------------------------- raw sockets


def test_raw_body_request(srv):
    data = np.array([1, 2, 3], np.float32).tobytes()
    request = (
        b"POST /v2/models/identity/infer HTTP/1.1\r\nHost: x\r\n"
        b"Inference-Header-Content-Length: 0\r\nContent-Length: 12\r\n\r\n" + data
    )
    ((status, headers, body),) = raw_exchange(srv.port, request, 1)
    assert status == 200
    n = int(headers["inference-header-content-length"])
    header = json.loads(body[:n])
    assert header["outputs"][0]["shape"] == [3]
    assert header["outputs"][0]["parameters"] == {"binary_data_size": 12}
    assert body[n:] == data


def test_raw_body_for_a_bytes_model(srv):
    request = (
        b"POST /v2/models/bytes_raw/infer HTTP/1.1\r\nHost: x\r\n"
        b"Inference-Header-Content-Length: 0\r\nContent-Length: 5\r\n\r\nhello"
    )
    ((status, headers, body),) = raw_exchange(srv.port, request, 1)
    assert status == 200
    n = int(headers["inference-header-content-length"])
    assert body[n:] == struct.pack("<I", 5) + b"hello"


def test_pipelined_requests_answered_in_order(srv):
    # The first request takes longest; answers must still come back in request order.
    def slow(ms: int, rid: str) -> bytes:
        body = json.dumps(
            {
                "id": rid,
                "inputs": [{"name": "INPUT0", "datatype": "INT32", "shape": [1], "data": [ms]}],
            }
        ).encode()
        return (
            b"POST /v2/models/slow/infer HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n"
            % len(body)
            + body
        )

    request = slow(300, "a") + slow(0, "b") + b"GET /v2/health/live HTTP/1.1\r\nHost: x\r\n\r\n"
    request += slow(100, "c")
    responses = raw_exchange(srv.port, request, 4)
    assert [r[0] for r in responses] == [200, 200, 200, 200]
    ids = [json.loads(r[2])["id"] if r[2] else "live" for r in responses]
    assert ids == ["a", "b", "live", "c"]


def test_deep_nesting_and_huge_shape_answer_400(srv):
    deep = b"[" * 100_000 + b"1" + b"]" * 100_000
    bodies = [
        b'{"inputs":[{"name":"INPUT0","datatype":"FP32","shape":[1],"data":' + deep + b"}]}",
        b'{"inputs":[{"name":"INPUT0","datatype":"FP32","shape":[4611686018427387904,'
        b'4611686018427387904],"data":[1,2,3]}]}',
    ]
    request = b"".join(
        b"POST /v2/models/identity/infer HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s"
        % (len(b), b)
        for b in bodies
    )
    statuses = [r[0] for r in raw_exchange(srv.port, request, 2)]
    assert statuses == [400, 400]
    ((status, _, _),) = raw_exchange(srv.port, b"GET /v2/health/live HTTP/1.1\r\n\r\n", 1)
    assert status == 200  # and the server is still up


# ------------------------------------------------------------ limits, shutdown


def test_input_size_limit():
    with serve(max_input_size=1 << 20) as running:
        with httpclient.InferenceServerClient(running.url) as c:
            big = np.zeros((1 << 20) // 4 + 1, np.float32)
            with pytest.raises(InferenceServerException) as info:
                _infer(c, "FP32", big, True, True)
            assert info.value.status() == "400"
            assert "exceeds the maximum allowed value of 1048576 bytes" in info.value.message()
            small = np.zeros(1000, np.float32)
            np.testing.assert_array_equal(
                _infer(c, "FP32", small, True, True).as_numpy("OUTPUT0"), small
            )


def test_shutdown_finishes_in_flight_requests_and_refuses_new_ones():
    with serve() as running:
        body = json.dumps(
            {"inputs": [{"name": "INPUT0", "datatype": "INT32", "shape": [1], "data": [300]}]}
        ).encode()
        request = (
            b"POST /v2/models/slow/infer HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n"
            % len(body)
            + body
        )
        result: dict = {}

        def send() -> None:
            result["responses"] = raw_exchange(running.port, request, 1)

        sender = threading.Thread(target=send)
        sender.start()
        deadline = time.monotonic() + 10
        while running.service.started == 0 and time.monotonic() < deadline:
            time.sleep(0.005)
        running.call(running.server.shutdown(10))
        sender.join(10)
        ((status, headers, _),) = result["responses"]
        assert status == 200 and headers["connection"] == "close"
        with pytest.raises(OSError):
            socket.create_connection(("127.0.0.1", running.port), timeout=2).close()


def test_close_aborts_connections_and_wait_closed_returns():
    with serve() as running:
        body = json.dumps(
            {"inputs": [{"name": "INPUT0", "datatype": "INT32", "shape": [1], "data": [5000]}]}
        ).encode()
        conn = socket.create_connection(("127.0.0.1", running.port), timeout=10)
        conn.sendall(
            b"POST /v2/models/slow/infer HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n"
            % len(body)
            + body
        )
        deadline = time.monotonic() + 10
        while running.service.started == 0 and time.monotonic() < deadline:
            time.sleep(0.005)
        assert running.server.connection_count == 1

        async def close_and_wait() -> None:
            running.server.close()
            await running.server.wait_closed()

        running.call(close_and_wait(), timeout=10)
        assert running.server.connection_count == 0
        try:
            assert conn.recv(1024) == b""  # closed without an answer
        except ConnectionResetError:
            pass
        conn.close()
