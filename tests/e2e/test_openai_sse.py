"""The OpenAI endpoint byte for byte over a raw socket: the SSE framing of streams (one
event per chunk, ``data: [DONE]`` last, the connection reusable after it), errors as
OpenAI's JSON with their status before a stream starts, and a reader that stalls being
cut off (the request cancelled in the model) rather than buffered without bound."""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator

import pytest

from tritium.testing import ServerProcess

from .openai_server import openai_server, wait_for_note


@pytest.fixture(scope="module")
def server() -> Iterator[ServerProcess]:
    with openai_server() as process:
        yield process


def _connect(server: ServerProcess) -> socket.socket:
    assert server.openai_port is not None
    return socket.create_connection(("127.0.0.1", server.openai_port), timeout=30)


def _send(sock: socket.socket, method: str, path: str, body: object = None) -> None:
    data = b"" if body is None else (body if isinstance(body, bytes) else json.dumps(body).encode())
    sock.sendall(
        b"%s %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        b"Content-Length: %d\r\n\r\n%b" % (method.encode(), path.encode(), len(data), data)
    )


class _Reader:
    """Reads HTTP/1.1 responses off one socket, keeping chunk boundaries."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.buffer = b""

    def _fill(self) -> None:
        data = self.sock.recv(65536)
        assert data, "connection closed"
        self.buffer += data

    def _until(self, marker: bytes) -> bytes:
        while marker not in self.buffer:
            self._fill()
        head, self.buffer = self.buffer.split(marker, 1)
        return head

    def _take(self, size: int) -> bytes:
        while len(self.buffer) < size:
            self._fill()
        data, self.buffer = self.buffer[:size], self.buffer[size:]
        return data

    def response(self) -> tuple[int, dict[str, str], list[bytes]]:
        """Status, headers, and the body as its chunks (one element if not chunked)."""
        head = self._until(b"\r\n\r\n").decode()
        status_line, *lines = head.split("\r\n")
        headers = {k.lower(): v.strip() for k, v in (line.split(":", 1) for line in lines)}
        if headers.get("transfer-encoding") == "chunked":
            chunks = []
            while True:
                size = int(self._until(b"\r\n"), 16)
                data = self._take(size + 2)[:-2]
                if size == 0:
                    break
                chunks.append(data)
            return int(status_line.split()[1]), headers, chunks
        body = self._take(int(headers.get("content-length", "0")))
        return int(status_line.split()[1]), headers, [body]


def _events(chunks: list[bytes]) -> list[bytes]:
    """Each chunk holds exactly one whole event: ``data: <payload>\\n\\n``."""
    payloads = []
    for chunk in chunks:
        assert chunk.startswith(b"data: ") and chunk.endswith(b"\n\n"), chunk
        assert chunk.count(b"\n\n") == 1, chunk
        payloads.append(chunk[6:-2])
    return payloads


def test_a_streamed_completion_is_framed_as_sse(server: ServerProcess) -> None:
    with _connect(server) as sock:
        reader = _Reader(sock)
        _send(
            sock,
            "POST",
            "/v1/completions",
            {"model": "tiny_lm", "prompt": "the server", "max_tokens": 3, "stream": True},
        )
        status, headers, chunks = reader.response()
        assert status == 200
        assert headers["content-type"] == "text/event-stream; charset=utf-8"
        assert headers["transfer-encoding"] == "chunked"
        payloads = _events(chunks)
        assert payloads[-1] == b"[DONE]"
        docs = [json.loads(p) for p in payloads[:-1]]
        assert [d["choices"][0]["text"] for d in docs] == [" reads", " the", " server", ""]
        assert [d["choices"][0]["finish_reason"] for d in docs] == [None, None, None, "length"]
        assert all(d["object"] == "text_completion" and d["model"] == "tiny_lm" for d in docs)
        # The connection is kept and answers the next request.
        _send(sock, "GET", "/v1/models")
        status, _, (body,) = reader.response()
        assert status == 200 and json.loads(body)["object"] == "list"


def test_a_streamed_chat_starts_with_the_role_and_ends_with_usage(server: ServerProcess) -> None:
    body = {
        "model": "tiny_lm",
        "messages": [{"role": "user", "content": "the model"}],
        "max_tokens": 2,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    with _connect(server) as sock:
        _send(sock, "POST", "/v1/chat/completions", body)
        status, _, chunks = _Reader(sock).response()
    payloads = _events(chunks)
    assert status == 200 and payloads[-1] == b"[DONE]"
    docs = [json.loads(p) for p in payloads[:-1]]
    assert docs[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    assert [d["choices"][0]["delta"] for d in docs[1:3]] == [
        {"content": docs[1]["choices"][0]["delta"]["content"]},
        {"content": docs[2]["choices"][0]["delta"]["content"]},
    ]
    assert docs[3]["choices"] == [
        {"index": 0, "delta": {}, "logprobs": None, "finish_reason": "length"}
    ]
    assert docs[4]["choices"] == []
    assert docs[4]["usage"]["completion_tokens"] == 2
    assert {d["object"] for d in docs} == {"chat.completion.chunk"}


@pytest.mark.parametrize(
    ("body", "status", "param", "code"),
    [
        ({"model": "nope", "prompt": "x", "stream": True}, 404, "model", "model_not_found"),
        ({"model": "add_sub", "prompt": "x", "stream": True}, 400, "model", "model_not_supported"),
        (
            {"model": "tiny_lm", "prompt": "x", "stream": True, "top_p": 2},
            400,
            "top_p",
            "invalid_value",
        ),
        ({"model": "tiny_lm", "prompt": [1, 2]}, 400, "prompt", "invalid_value"),
        (
            {"model": "tiny_lm", "prompt": "x", "stream_options": {"include_usage": True}},
            400,
            "stream_options",
            "invalid_value",
        ),
        (b"{not json", 400, None, None),
    ],
)
def test_errors_before_a_stream_are_openai_json(
    server: ServerProcess, body: object, status: int, param: str | None, code: str | None
) -> None:
    with _connect(server) as sock:
        _send(sock, "POST", "/v1/completions", body)
        got, headers, (raw,) = _Reader(sock).response()
    assert got == status
    assert headers["content-type"] == "application/json"
    doc = json.loads(raw)
    assert set(doc) == {"error"}
    assert set(doc["error"]) == {"message", "type", "param", "code"}
    assert (doc["error"]["param"], doc["error"]["code"]) == (param, code)


def test_a_stalled_reader_is_cut_off_and_the_request_cancelled(server: ServerProcess) -> None:
    """64 KiB pieces as fast as the model makes them, to a client that reads nothing: the
    stream is cut off once about 8 MiB wait (see EventStream), the model sees the
    cancellation, and the server's memory does not grow by the 320 MiB it would hold."""
    assert server.proc is not None
    note = "text_flood: cancelled after"
    before = server.log.count(note)
    rss_before = _rss_kib(server.proc.pid)
    with _connect(server) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)
        _send(
            sock, "POST", "/v1/completions", {"model": "text_flood", "prompt": "x", "stream": True}
        )
        sent = wait_for_note(server, note, before, timeout=60)
        growth_mib = (_rss_kib(server.proc.pid) - rss_before) / 1024
        # The connection was dropped: the body it promised cannot be finished.
        sock.settimeout(10)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and sock.recv(1 << 20):
            pass
    assert sent < 1000
    assert growth_mib < 150


def _rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise AssertionError("no VmRSS")
