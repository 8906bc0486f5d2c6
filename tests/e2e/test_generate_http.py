"""Triton's generate extension over HTTP against a real server: ``/generate`` (one
JSON answer) and ``/generate_stream`` (Server-Sent Events read with aiohttp), with
decoupled and ordinary models; cancellation by closing the connection; a reader that
stalls is cut off instead of growing the server's memory.
"""

from __future__ import annotations

import asyncio
import json
import socket
import time
from collections.abc import Iterator

import aiohttp
import orjson
import pytest

from tritium.testing import ServerProcess

from .conftest import TEST_MODELS

MODELS = ("decoupled_words", "async_plain")


@pytest.fixture(scope="module")
def server() -> Iterator[ServerProcess]:
    args = ["--model-control-mode=explicit", *(f"--load-model={m}" for m in MODELS)]
    with ServerProcess([TEST_MODELS], args) as process:
        yield process


def _url(server: ServerProcess, model: str, what: str) -> str:
    return f"http://{server.http_url}/v2/models/{model}/{what}"


async def _events(server: ServerProcess, model: str, body: dict) -> tuple[int, str, list]:
    """(status, content type, [(seconds since the request, event JSON)]) of a stream."""
    async with aiohttp.ClientSession() as session:
        start = time.monotonic()
        async with session.post(_url(server, model, "generate_stream"), json=body) as reply:
            events = []
            if reply.status != 200:
                return reply.status, reply.content_type, [await reply.json()]
            async for line in reply.content:
                if line.startswith(b"data: "):
                    events.append((time.monotonic() - start, orjson.loads(line[6:])))
            return reply.status, reply.headers["Content-Type"], events


def _stream(server: ServerProcess, model: str, body: dict) -> tuple[int, str, list]:
    return asyncio.run(asyncio.wait_for(_events(server, model, body), 60))


def test_generate_stream_sends_each_response_as_an_event(server: ServerProcess) -> None:
    status, content_type, events = _stream(server, "decoupled_words", {"COUNT": 3, "id": "g1"})
    assert status == 200
    assert content_type == "text/event-stream; charset=utf-8"
    assert [e for _, e in events] == [
        {"id": "g1", "model_name": "decoupled_words", "model_version": "1", "INDEX": i,
         "WORD": f"w{i}"}
        for i in range(3)
    ]


def test_events_arrive_as_they_are_produced(server: ServerProcess) -> None:
    status, _, events = _stream(server, "decoupled_words", {"COUNT": 6, "mode": "slow"})
    assert status == 200
    assert [e["INDEX"] for _, e in events] == list(range(6))
    # 50 ms between responses: the first is read well before the last is sent.
    assert events[-1][0] - events[0][0] > 0.15


def test_errors_are_events_and_the_stream_goes_on(server: ServerProcess) -> None:
    _, _, events = _stream(server, "decoupled_words", {"COUNT": 0, "mode": "error_mid"})
    assert [e.get("error", e.get("WORD")) for _, e in events] == ["w0", "bad word", "w1"]


def test_generate_stream_of_an_ordinary_model(server: ServerProcess) -> None:
    _, _, events = _stream(server, "async_plain", {"X": [1.5, -2]})
    assert len(events) == 1
    assert events[0][1]["Y"] == [3.0, -4.0]


def test_an_error_before_inference_is_a_json_error(server: ServerProcess) -> None:
    status, content_type, events = _stream(server, "decoupled_words", {"COUNT": "three"})
    assert status == 400 and content_type == "application/json"
    assert "COUNT" in events[0]["error"]
    status, _, events = _stream(server, "no_such_model", {"COUNT": 1})
    assert status == 404


async def _post(server: ServerProcess, model: str, what: str, body: dict) -> tuple[int, dict]:
    async with aiohttp.ClientSession() as session:
        async with session.post(_url(server, model, what), json=body) as reply:
            return reply.status, await reply.json()


def _generate(server: ServerProcess, model: str, body: dict) -> tuple[int, dict]:
    return asyncio.run(asyncio.wait_for(_post(server, model, "generate", body), 60))


def test_generate_answers_one_json_object(server: ServerProcess) -> None:
    status, doc = _generate(server, "decoupled_words", {"COUNT": 1, "id": "7"})
    assert status == 200
    assert doc == {
        "id": "7", "model_name": "decoupled_words", "model_version": "1", "INDEX": 0,
        "WORD": "w0",
    }
    status, doc = _generate(server, "async_plain", {"X": [1, 2], "parameters": {"k": 1}})
    assert status == 200 and doc["Y"] == [2.0, 4.0]


def test_generate_refuses_more_than_one_response(server: ServerProcess) -> None:
    status, doc = _generate(server, "decoupled_words", {"COUNT": 2})
    assert status == 400
    assert doc["error"] == (
        "generate expects model to produce exactly 1 response, use generate stream for "
        "model that generates various number of responses"
    )


def test_infer_on_a_decoupled_model_is_refused(server: ServerProcess) -> None:
    body = {"inputs": [{"name": "COUNT", "shape": [1], "datatype": "INT32", "data": [1]}]}
    status, doc = asyncio.run(_post(server, "decoupled_words", "infer", body))
    assert status == 501
    assert doc == {
        "error": "HTTP end point doesn't support models with decoupled transaction policy"
    }


def _cancel_notes(server: ServerProcess) -> int:
    return server.log.count("decoupled_words: cancelled after")


def _wait_for_cancel_note(server: ServerProcess, before: int, timeout: float = 30) -> int:
    deadline = time.monotonic() + timeout
    while _cancel_notes(server) <= before:
        assert time.monotonic() < deadline, server.log[-3000:]
        time.sleep(0.05)
    return int(server.log.rsplit("decoupled_words: cancelled after", 1)[1].split()[0])


def _raw_stream(server: ServerProcess, body: dict) -> socket.socket:
    host, port = server.http_url.split(":")
    sock = socket.create_connection((host, int(port)), timeout=30)
    data = json.dumps(body).encode()
    sock.sendall(
        b"POST /v2/models/decoupled_words/generate_stream HTTP/1.1\r\nHost: x\r\n"
        b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n%b" % (len(data), data)
    )
    return sock


def test_closing_the_connection_cancels_the_request(server: ServerProcess) -> None:
    before = _cancel_notes(server)
    sock = _raw_stream(server, {"COUNT": 200, "mode": "slow"})
    received = b""
    while received.count(b"data: ") < 2:
        received += sock.recv(65536)
    sock.close()
    assert _wait_for_cancel_note(server, before) < 100


def _rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise AssertionError("no VmRSS")


def test_a_stalled_reader_is_cut_off(server: ServerProcess) -> None:
    """1 MiB responses as fast as the model makes them, to a client that reads
    nothing: the server cuts the stream off and the model stops, instead of holding
    hundreds of MiB."""
    assert server.proc is not None
    before = _cancel_notes(server)
    rss_before = _rss_kib(server.proc.pid)
    sock = _raw_stream(server, {"COUNT": 1000, "mode": "big"})
    try:
        sent = _wait_for_cancel_note(server, before, timeout=60)
        growth_mib = (_rss_kib(server.proc.pid) - rss_before) / 1024
    finally:
        sock.close()
    assert sent < 200
    assert growth_mib < 150


def test_async_initialize_and_finalize_are_awaited() -> None:
    """``async def initialize`` ran (its attribute is used by execute) and ``async def
    finalize`` ran on shutdown, once per instance."""
    args = ["--model-control-mode=explicit", "--load-model=async_plain"]
    process = ServerProcess([TEST_MODELS], args)
    with process:
        status, doc = asyncio.run(_post(process, "async_plain", "generate", {"X": [1, 1]}))
        assert status == 200 and doc["Y"] == [2.0, 2.0]
    assert process.log.count("async_plain finalized") == 2, process.log[-2000:]
