"""The HTTP/1.1 protocol driven byte by byte through a fake transport (no sockets)."""

from __future__ import annotations

import asyncio
import gzip

import numpy as np
import orjson
import pytest

from tritium.core.completion import Completion
from tritium.core.errors import NotFound
from tritium.core.types import InferRequest, InferResponse, OutputTensor
from tritium.core.write_burst import WRITES
from tritium.frontends.http.handlers import KServeRoutes
from tritium.frontends.http.messages import DeferredResponse, HttpResponse, json_response
from tritium.frontends.http.protocol import HttpProtocol
from tritium.frontends.http.router import Router
from tritium.testing.fakes import FakeTransport


def parse_responses(data: bytes) -> list[tuple[int, dict[str, str], bytes]]:
    """Split written bytes into (status, headers, body) using Content-Length."""
    out = []
    rest = bytes(data)
    while rest:
        head, sep, rest = rest.partition(b"\r\n\r\n")
        assert sep, f"incomplete response head: {head!r}"
        lines = head.decode("latin-1").split("\r\n")
        status = int(lines[0].split(" ")[1])
        headers = {}
        for line in lines[1:]:
            name, _, value = line.partition(": ")
            headers[name.lower()] = value
        if status == 100:
            out.append((status, headers, b""))
            continue
        size = int(headers["content-length"])
        out.append((status, headers, rest[:size]))
        rest = rest[size:]
    return out


class IdentityService:
    """Echoes every input as OUTPUT<n>; one model, "ident"."""

    def live(self) -> bool:
        return True

    def ready(self) -> bool:
        return True

    def server_metadata(self) -> dict:
        return {"name": "fake", "version": "0", "extensions": []}

    def model_ready(self, name: str, version: str) -> bool:
        return self._check(name)

    def model_metadata(self, name: str, version: str) -> dict:
        self._check(name)
        return {"name": name}

    def model_config(self, name: str, version: str) -> dict:
        self._check(name)
        return {"name": name, "max_batch_size": 0, "input": []}

    def submit(self, request: InferRequest) -> asyncio.Future:
        return asyncio.ensure_future(self.infer(request))

    async def infer(self, request: InferRequest) -> InferResponse:
        self._check(request.model_name)
        outputs = [
            OutputTensor(f"OUTPUT{i}", t.datatype, t.shape, t.data)
            for i, t in enumerate(request.inputs)
        ]
        return InferResponse(request.model_name, "1", request.id, outputs)

    def _check(self, name: str) -> bool:
        if name != "ident":
            raise NotFound(f"Request for unknown model: '{name}' is not found")
        return True


class Harness:
    """A protocol on a fake transport, with a router the test can extend."""

    def __init__(self, max_input_size: int = 1 << 20, max_pipeline: int = 32) -> None:
        self.router = Router()
        KServeRoutes(IdentityService(), max_input_size).register(self.router)
        self.connections: set[HttpProtocol] = set()
        self.protocol = HttpProtocol(
            self.router,
            self.connections,
            max_input_size=max_input_size,
            max_pipeline=max_pipeline,
        )
        self.transport = FakeTransport()
        self.protocol.connection_made(self.transport)

    def feed(self, data: bytes) -> None:
        self.protocol.data_received(data)

    def responses(self):
        return parse_responses(self.transport.data)


async def settle() -> None:
    for _ in range(10):
        await asyncio.sleep(0)


def run(coro):
    return asyncio.run(coro)


INFER_BODY = orjson.dumps(
    {"inputs": [{"name": "IN", "datatype": "INT32", "shape": [2], "data": [1, 2]}]}
)


def post(path: str, body: bytes, *headers: str, version: str = "1.1") -> bytes:
    extra = "".join(f"{h}\r\n" for h in headers)
    return (
        f"POST {path} HTTP/{version}\r\nHost: x\r\nContent-Length: {len(body)}\r\n{extra}\r\n"
    ).encode() + body


def get(path: str, *headers: str, version: str = "1.1") -> bytes:
    extra = "".join(f"{h}\r\n" for h in headers)
    return f"GET {path} HTTP/{version}\r\nHost: x\r\n{extra}\r\n".encode()


# ----------------------------------------------------------------- basics


def test_keep_alive_serves_several_requests():
    async def scenario():
        h = Harness()
        h.feed(get("/v2/health/live"))
        h.feed(post("/v2/models/ident/infer", INFER_BODY))
        await settle()
        (s1, hd1, b1), (s2, hd2, b2) = h.responses()
        assert (s1, b1, hd1["content-type"]) == (200, b"", "text/plain")
        assert "connection" not in hd1 and "connection" not in hd2
        assert s2 == 200 and hd2["content-type"] == "application/json"
        assert orjson.loads(b2)["outputs"][0]["data"] == [1, 2]
        assert not h.transport.closed

    run(scenario())


def test_connection_close_is_honoured():
    async def scenario():
        h = Harness()
        h.feed(get("/v2/health/ready", "Connection: close") + get("/v2/health/live"))
        await settle()
        responses = h.responses()
        assert len(responses) == 1  # nothing after the closing request is answered
        assert responses[0][1]["connection"] == "close"
        assert h.transport.closed

    run(scenario())


def test_http10_closes_unless_keep_alive():
    async def scenario():
        h = Harness()
        h.feed(get("/v2/health/live", version="1.0"))
        assert bytes(h.transport.data).startswith(b"HTTP/1.0 200 OK\r\n")
        assert h.responses()[0][1]["connection"] == "close" and h.transport.closed

        h = Harness()
        h.feed(get("/v2/health/live", "Connection: keep-alive", version="1.0"))
        assert h.responses()[0][1]["connection"] == "keep-alive"
        assert not h.transport.closed

    run(scenario())


def test_request_split_into_single_bytes():
    async def scenario():
        h = Harness()
        for i in range(len(raw := post("/v2/models/ident/infer", INFER_BODY))):
            h.feed(raw[i : i + 1])
        await settle()
        ((status, _, body),) = h.responses()
        assert status == 200 and orjson.loads(body)["outputs"][0]["data"] == [1, 2]

    run(scenario())


def test_chunked_request_body():
    async def scenario():
        h = Harness()
        head = (
            b"POST /v2/models/ident/infer HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
        )
        chunks = b"".join(
            b"%x\r\n%s\r\n" % (len(part), part) for part in (INFER_BODY[:7], INFER_BODY[7:])
        )
        h.feed(head + chunks + b"0\r\n\r\n")
        await settle()
        ((status, _, body),) = h.responses()
        assert status == 200 and orjson.loads(body)["outputs"][0]["data"] == [1, 2]

    run(scenario())


def test_gzip_request_and_response():
    async def scenario():
        h = Harness()
        h.feed(
            post(
                "/v2/models/ident/infer",
                gzip.compress(INFER_BODY),
                "Content-Encoding: gzip",
                "Accept-Encoding: gzip",
            )
        )
        await settle()
        ((status, headers, body),) = h.responses()
        assert status == 200 and headers["content-encoding"] == "gzip"
        assert orjson.loads(gzip.decompress(body))["outputs"][0]["data"] == [1, 2]

    run(scenario())


def test_unsupported_content_encoding_is_501_with_accept_encoding():
    async def scenario():
        h = Harness()
        h.feed(post("/v2/models/ident/infer", INFER_BODY, "Content-Encoding: br"))
        await settle()
        ((status, headers, body),) = h.responses()
        assert status == 501 and headers["accept-encoding"] == "gzip, deflate"
        assert body == b'{"error":"Unsupported compression type"}'

    run(scenario())


def test_binary_infer_response_headers():
    async def scenario():
        h = Harness()
        data = np.array([1.5, 2.5], np.float32).tobytes()
        header = orjson.dumps(
            {
                "inputs": [
                    {
                        "name": "IN",
                        "datatype": "FP32",
                        "shape": [2],
                        "parameters": {"binary_data_size": 8},
                    }
                ],
                "parameters": {"binary_data_output": True},
            }
        )
        h.feed(
            post(
                "/v2/models/ident/infer",
                header + data,
                f"Inference-Header-Content-Length: {len(header)}",
            )
        )
        await settle()
        ((status, headers, body),) = h.responses()
        assert status == 200
        assert headers["content-type"] == "application/octet-stream"
        n = int(headers["inference-header-content-length"])
        assert orjson.loads(body[:n])["outputs"][0]["parameters"] == {"binary_data_size": 8}
        assert body[n:] == data

    run(scenario())


@pytest.mark.parametrize(
    "request_bytes,status,body",
    [
        (get("/v2/nothing"), 404, b'{"error":"Not Found"}'),
        (post("/v2/health/live", b""), 405, b'{"error":"Method Not Allowed"}'),
        (
            post("/v2/models/nope/infer", INFER_BODY),
            404,
            b'{"error":"Request for unknown model: \'nope\' is not found"}',
        ),
        (get("/v2/models/nope/ready"), 400, b'{"error":"Model version not ready"}'),
        (
            post("/v2/models/ident/infer", INFER_BODY, "Inference-Header-Content-Length: 500"),
            400,
            b'{"error":"inference header size should be in range (0, %d), got: 500"}'
            % len(INFER_BODY),
        ),
    ],
)
def test_error_answers(request_bytes, status, body):
    async def scenario():
        h = Harness()
        h.feed(request_bytes)
        await settle()
        ((got_status, _, got_body),) = h.responses()
        assert (got_status, got_body) == (status, body)
        assert not h.transport.closed  # errors do not cost the connection

    run(scenario())


# -------------------------------------------------------------- pipelining


def add_gated_route(h: Harness) -> dict[str, asyncio.Event]:
    gates: dict[str, asyncio.Event] = {}

    async def gated(request, params):
        gate = gates.setdefault(params["n"], asyncio.Event())
        await gate.wait()
        return json_response({"n": params["n"]})

    h.router.add("GET", "/gate/{n}", gated)
    return gates


def test_pipelined_responses_keep_request_order():
    async def scenario():
        h = Harness()
        gates = add_gated_route(h)
        h.feed(get("/gate/a") + get("/v2/health/live") + get("/gate/b") + get("/gate/c"))
        await settle()
        assert h.transport.data == b""  # the first answer is not ready yet
        gates["c"].set()
        gates["b"].set()
        await settle()
        assert h.transport.data == b""
        gates["a"].set()
        await settle()
        bodies = [body for _, _, body in h.responses()]
        assert bodies == [b'{"n":"a"}', b"", b'{"n":"b"}', b'{"n":"c"}']

    run(scenario())


def add_deferred_route(h: Harness) -> dict[str, Completion]:
    """``GET /later/{n}`` answers when the test completes ``done[n]`` (callbacks inline,
    as a batch's completions run when the scheduler hands the batch out)."""
    done: dict[str, Completion] = {}

    def later(request, params):
        completion = done[params["n"]] = Completion()
        return DeferredResponse(completion, lambda c: json_response({"n": c.result()}))

    h.router.add("GET", "/later/{n}", later)
    return done


def test_answers_of_a_batch_being_handed_out_are_written_at_its_end():
    async def scenario():
        h = Harness()
        done = add_deferred_route(h)
        h.feed(get("/later/a") + get("/later/b"))
        with WRITES.held():
            done["a"].set_result("a")
            done["b"].set_result("b")
            assert h.transport.data == b""  # encoded, queued
        assert [body for _, _, body in h.responses()] == [b'{"n":"a"}', b'{"n":"b"}']
        assert not h.transport.closed

    run(scenario())


def test_a_closing_answer_writes_the_queued_ones_before_it_and_then_closes():
    async def scenario():
        h = Harness()
        done = add_deferred_route(h)
        h.feed(get("/later/a") + get("/later/b", "Connection: close"))
        with WRITES.held():
            done["a"].set_result("a")
            assert h.transport.data == b""
            done["b"].set_result("b")
            assert h.transport.closed  # after both answers, in order
        statuses = [(status, body) for status, _, body in h.responses()]
        assert statuses == [(200, b'{"n":"a"}'), (200, b'{"n":"b"}')]

    run(scenario())


def test_reading_pauses_when_too_many_requests_are_queued():
    async def scenario():
        h = Harness(max_pipeline=2)
        gates = add_gated_route(h)
        h.feed(get("/gate/a") + get("/gate/b"))
        await settle()
        assert not h.transport.reading
        gates["a"].set()
        await settle()
        assert h.transport.reading  # one answered, one left: below the bound again
        gates["b"].set()
        await settle()
        assert len(h.responses()) == 2

    run(scenario())


def test_reading_pauses_while_the_write_buffer_is_full():
    async def scenario():
        h = Harness()
        h.protocol.pause_writing()
        assert not h.transport.reading
        h.protocol.resume_writing()
        assert h.transport.reading

    run(scenario())


def test_connection_lost_cancels_running_handlers():
    async def scenario():
        h = Harness()
        cancelled = asyncio.Event()

        async def slow(request, params):
            try:
                await asyncio.sleep(3600)
            except asyncio.CancelledError:
                cancelled.set()
                raise
            return HttpResponse()

        h.router.add("GET", "/slow", slow)
        h.feed(get("/slow"))
        await settle()
        h.protocol.connection_lost(None)
        await settle()
        assert cancelled.is_set()
        assert h.protocol.closed.done()
        assert not h.connections

    run(scenario())


def test_handler_exception_is_a_500_and_the_connection_lives():
    async def scenario():
        h = Harness()

        def broken(request, params):
            raise RuntimeError("secret detail /tmp/x")

        async def broken_async(request, params):
            raise RuntimeError("secret detail /tmp/x")

        h.router.add("GET", "/broken", broken)
        h.router.add("GET", "/broken-async", broken_async)
        h.feed(get("/broken") + get("/broken-async") + get("/v2/health/live"))
        await settle()
        (s1, _, b1), (s2, _, b2), (s3, _, _) = h.responses()
        assert (s1, s2, s3) == (500, 500, 200)
        assert b"secret" not in b1 + b2
        assert not h.transport.closed

    run(scenario())


# ------------------------------------------------------------- limits, errors


def test_content_length_over_the_limit_is_refused_after_draining_the_body():
    async def scenario():
        h = Harness(max_input_size=100)
        body = b"x" * 150
        h.feed(post("/v2/models/ident/infer", body)[:-50])
        assert h.transport.data == b""  # the answer waits for the whole body
        h.feed(body[-50:])
        ((status, headers, payload),) = h.responses()
        assert status == 400 and headers["connection"] == "close"
        assert orjson.loads(payload)["error"] == (
            "Request body size of 150 bytes exceeds the maximum allowed value of 100 bytes. "
            "Use --http-max-input-size to increase the limit."
        )
        assert h.transport.closed

    run(scenario())


def test_expect_continue_over_the_limit_is_refused_before_the_body():
    async def scenario():
        h = Harness(max_input_size=100)
        raw = post("/v2/models/ident/infer", b"x" * 150, "Expect: 100-continue")
        h.feed(raw[:-150])
        ((status, headers, payload),) = h.responses()
        assert status == 400 and headers["connection"] == "close"
        assert b"Request body size of 150 bytes exceeds" in payload
        assert h.transport.closed

    run(scenario())


def test_huge_url_is_refused():
    async def scenario():
        h = Harness()
        h.feed(b"GET /" + b"a" * 70_000)
        await settle()  # a read this big is parsed a slice per loop iteration
        ((status, _, body),) = h.responses()
        assert status == 431 and body == b'{"error":"request header too large"}'

    run(scenario())


def test_chunked_body_over_the_limit_is_refused():
    async def scenario():
        h = Harness(max_input_size=100)
        head = (
            b"POST /v2/models/ident/infer HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
        )
        h.feed(head + b"40\r\n" + b"x" * 64 + b"\r\n" + b"40\r\n" + b"y" * 64 + b"\r\n0\r\n\r\n")
        ((status, _, payload),) = h.responses()
        assert status == 400 and b"exceeds the maximum allowed value" in payload
        assert h.transport.closed

    run(scenario())


def test_gzip_bomb_is_refused():
    async def scenario():
        h = Harness(max_input_size=10_000)
        bomb = gzip.compress(b"\0" * 1_000_000)
        h.feed(post("/v2/models/ident/infer", bomb, "Content-Encoding: gzip"))
        await settle()
        ((status, _, payload),) = h.responses()
        assert status == 400 and b"exceeds the maximum allowed value of 10000" in payload

    run(scenario())


def test_malformed_request_line_is_400_and_close():
    async def scenario():
        h = Harness()
        h.feed(get("/v2/health/live") + b"GARBAGE\r\n\r\n")
        await settle()
        (s1, _, _), (s2, headers, body) = h.responses()
        assert (s1, s2) == (200, 400)
        assert headers["connection"] == "close" and body.startswith(b'{"error":"malformed')
        assert h.transport.closed

    run(scenario())


def test_oversized_headers_are_refused():
    async def scenario():
        h = Harness()
        h.feed(get("/v2/health/live", "X-Big: " + "a" * 70_000))
        await settle()  # a read this big is parsed a slice per loop iteration
        ((status, _, body),) = h.responses()
        assert status == 431 and body == b'{"error":"request header too large"}'
        assert h.transport.closed

    run(scenario())


def test_expect_100_continue():
    async def scenario():
        h = Harness()
        raw = post("/v2/models/ident/infer", INFER_BODY, "Expect: 100-continue")
        head, body = raw[: -len(INFER_BODY)], raw[-len(INFER_BODY) :]
        h.feed(head)
        assert bytes(h.transport.data) == b"HTTP/1.1 100 Continue\r\n\r\n"
        h.feed(body)
        await settle()
        statuses = [status for status, _, _ in h.responses()]
        assert statuses == [100, 200]

    run(scenario())


def test_upgrade_requests_are_answered_then_the_connection_closes():
    async def scenario():
        h = Harness()
        h.feed(get("/v2/health/live", "Connection: Upgrade", "Upgrade: h2c") + b"PRI * HTTP/2.0")
        await settle()
        ((status, headers, _),) = h.responses()
        assert status == 200 and headers["connection"] == "close"
        assert h.transport.closed

    run(scenario())


# ----------------------------------------------------------------- draining


def test_drain_closes_an_idle_connection_at_once():
    async def scenario():
        h = Harness()
        h.protocol.begin_drain()
        assert h.transport.closed

    run(scenario())


def test_drain_lets_the_running_request_finish_then_closes():
    async def scenario():
        h = Harness()
        gates = add_gated_route(h)
        h.feed(get("/gate/a"))
        await settle()
        h.protocol.begin_drain()
        assert not h.transport.closed
        h.feed(get("/v2/health/live"))  # arrives after drain began: not read
        gates["a"].set()
        await settle()
        ((status, headers, body),) = h.responses()
        assert status == 200 and body == b'{"n":"a"}'
        assert headers["connection"] == "close" and h.transport.closed

    run(scenario())


def test_drain_waits_for_a_request_being_received():
    async def scenario():
        h = Harness()
        raw = post("/v2/models/ident/infer", INFER_BODY)
        h.feed(raw[:-5])
        h.protocol.begin_drain()
        assert not h.transport.closed
        h.feed(raw[-5:])
        await settle()
        ((status, headers, _),) = h.responses()
        assert status == 200 and headers["connection"] == "close"
        assert h.transport.closed

    run(scenario())
