"""Repeated request heads: reads that repeat a kept head skip the parser and mean the same."""

from __future__ import annotations

import asyncio

import httptools
import orjson
import pytest

from tritium.frontends.http.messages import json_response
from tritium.frontends.http.protocol import HttpProtocol
from tritium.frontends.http.request_heads import head_ends_at_end, planned_head
from tritium.frontends.http.router import Router
from tritium.testing.fakes import FakeTransport


class CountingParser:
    """The connection's parser, counting the reads it is given."""

    def __init__(self, parser: httptools.HttpRequestParser) -> None:
        self.parser = parser
        self.feeds = 0

    def feed_data(self, data: bytes) -> None:
        self.feeds += 1
        self.parser.feed_data(data)

    def __getattr__(self, name: str):
        return getattr(self.parser, name)


def echo(request, params):
    """What the handler saw: method, path, query, two headers and the body."""
    return json_response(
        {
            "method": request.method,
            "path": request.path,
            "query": request.query,
            "type": request.headers.get("content-type"),
            "tag": request.headers.get("x-tag"),
            "body": request.body.decode(),
        }
    )


class Connection:
    def __init__(self) -> None:
        router = Router()
        router.add("POST", "/echo/{name}", echo)
        router.add("GET", "/echo/{name}", echo)
        self.protocol = HttpProtocol(router, set(), max_input_size=1 << 20)
        self.transport = FakeTransport()
        self.protocol.connection_made(self.transport)
        self.parser = CountingParser(self.protocol._parser)
        self.protocol._parser = self.parser

    def answers(self) -> list[dict]:
        out = []
        rest = bytes(self.transport.data)
        while rest:
            head, _, rest = rest.partition(b"\r\n\r\n")
            assert head.startswith(b"HTTP/1.1 200 OK"), head
            size = int(head.rpartition(b"Content-Length: ")[2].split(b"\r\n")[0])
            out.append(orjson.loads(rest[:size]))
            rest = rest[size:]
        return out


def post(body: bytes, *headers: str, path: str = "/echo/a?x=1") -> bytes:
    extra = "".join(f"{h}\r\n" for h in headers)
    head = f"POST {path} HTTP/1.1\r\nHost: h\r\nContent-Length: {len(body)}\r\n{extra}\r\n"
    return head.encode() + body


def expected(body: bytes, tag: str | None = None) -> dict:
    return {
        "method": "POST",
        "path": "/echo/a",
        "query": "x=1",
        "type": "text/plain",
        "tag": tag,
        "body": body.decode(),
    }


def run(scenario) -> None:
    asyncio.run(scenario)


def test_a_head_read_twice_is_kept_and_later_reads_skip_the_parser():
    async def scenario():
        c = Connection()
        bodies = [b"first", b"other", b"third", b"fifth"]
        for body in bodies:
            c.protocol.data_received(post(body, "Content-Type: text/plain"))
        assert c.parser.feeds == 2  # the third and fourth requests were not parsed
        assert c.answers() == [expected(b) for b in bodies]

    run(scenario())


def test_other_heads_and_other_lengths_are_parsed():
    async def scenario():
        c = Connection()
        reads = [
            post(b"aaaa", "Content-Type: text/plain"),
            post(b"bbbb", "Content-Type: text/plain"),
            post(b"cccc", "Content-Type: text/plain"),  # kept head: not parsed
            post(b"ddddd", "Content-Type: text/plain"),  # another length
            post(b"eeee", "Content-Type: text/plain", "X-Tag: t"),  # another header
            post(b"ffff", "Content-Type: text/plain"),  # the kept head again
        ]
        for read in reads:
            c.protocol.data_received(read)
        assert c.parser.feeds == 4
        tags = [None, None, None, None, "t", None]
        bodies = [b"aaaa", b"bbbb", b"cccc", b"ddddd", b"eeee", b"ffff"]
        assert c.answers() == [expected(b, t) for b, t in zip(bodies, tags)]

    run(scenario())


def test_partial_and_pipelined_reads_of_a_kept_head_are_parsed():
    async def scenario():
        c = Connection()
        one = post(b"body", "Content-Type: text/plain")
        c.protocol.data_received(one)
        c.protocol.data_received(one)
        assert c.protocol._head is not None
        c.protocol.data_received(one[:-2])  # the body arrives in two reads
        c.protocol.data_received(one[-2:])
        c.protocol.data_received(one + one)  # two requests in one read
        c.protocol.data_received(one)
        assert c.parser.feeds == 5
        assert c.answers() == [expected(b"body")] * 6

    run(scenario())


@pytest.mark.parametrize(
    "extra",
    [
        ("Connection: close",),
        ("Expect: 100-continue",),
    ],
)
def test_heads_that_change_the_connection_are_never_kept(extra):
    async def scenario():
        c = Connection()
        c.protocol.data_received(post(b"x", "Content-Type: text/plain", *extra))
        if c.transport.closed:
            return  # closing requests end the connection: nothing could be kept
        c.protocol.data_received(post(b"y", "Content-Type: text/plain", *extra))
        assert c.protocol._head is None

    run(scenario())


def test_chunked_bodies_are_always_parsed():
    async def scenario():
        c = Connection()
        read = (
            b"POST /echo/a?x=1 HTTP/1.1\r\nHost: h\r\nContent-Type: text/plain\r\n"
            b"Transfer-Encoding: chunked\r\n\r\n4\r\nbody\r\n0\r\n\r\n"
        )
        for _ in range(3):
            c.protocol.data_received(read)
        assert c.parser.feeds == 3 and c.protocol._head is None
        assert c.answers() == [expected(b"body")] * 3

    run(scenario())


def test_bytes_after_a_body_never_become_part_of_a_kept_head():
    async def scenario():
        c = Connection()
        # A body that starts with CRLF and a stray CRLF after it: the head taken as "all but
        # the body's length" would swallow the body's first two bytes.
        read = post(b"\r\nxy", "Content-Type: text/plain") + b"\r\n"
        c.protocol.data_received(read)
        c.protocol.data_received(read)
        assert c.protocol._head is None
        c.protocol.data_received(post(b"\r\nzw", "Content-Type: text/plain"))
        assert c.answers()[-1] == expected(b"\r\nzw")

    run(scenario())


def test_bodyless_requests_are_kept_too():
    async def scenario():
        c = Connection()
        read = b"GET /echo/b HTTP/1.1\r\nHost: h\r\n\r\n"
        for _ in range(4):
            c.protocol.data_received(read)
        assert c.parser.feeds == 2
        answers = c.answers()
        assert len(answers) == 4 and all(a["path"] == "/echo/b" for a in answers)

    run(scenario())


def test_a_draining_connection_parses_and_closes():
    async def scenario():
        c = Connection()
        one = post(b"body", "Content-Type: text/plain")
        c.protocol.data_received(one)
        c.protocol.data_received(one)
        c.protocol.begin_drain()
        assert c.transport.closed
        c.protocol.data_received(one)  # after the close: ignored
        assert len(c.answers()) == 2

    run(scenario())


def test_head_ends_at_end():
    head = b"POST /x HTTP/1.1\r\nHost: h\r\nContent-Length: 4\r\n\r\n"
    assert head_ends_at_end(head, 4)
    assert not head_ends_at_end(head + b"ab", 4)  # body bytes inside
    assert not head_ends_at_end(head[:-2], 4)  # the blank line is missing
    assert not head_ends_at_end(b"GARBAGE\r\n\r\n", 0)
    get = b"GET /x HTTP/1.1\r\nHost: h\r\n\r\n"
    assert head_ends_at_end(get, 0)
    assert not head_ends_at_end(get, 3)  # complete, so no body can follow it


def test_planned_head_checks_the_declared_length():
    head = b"POST /x HTTP/1.1\r\nHost: h\r\nContent-Length: 4\r\n\r\n"
    headers = {"host": "h", "content-length": "4"}
    kept = planned_head(head, 4, "POST", "/x", "", headers)
    assert kept is not None and kept.size == len(head) + 4
    assert planned_head(head, 5, "POST", "/x", "", headers) is None
    assert planned_head(head, 4, "POST", "/x", "", {"host": "h", "content-length": "+4"}) is None
    assert planned_head(head, 4, "POST", "/x", "", {**headers, "expect": "100-continue"}) is None


def test_a_head_that_cannot_be_kept_is_checked_once(monkeypatch):
    from tritium.frontends.http import protocol

    checks = []
    real = protocol.planned_head

    def counting(*args):
        checks.append(args[0])
        return real(*args)

    monkeypatch.setattr(protocol, "planned_head", counting)

    async def scenario():
        c = Connection()
        read = post(b"x", "Content-Type: text/plain", "X-Pad: " + "p" * 9000)  # too long to keep
        for _ in range(6):
            c.protocol.data_received(read)
        assert c.protocol._head is None and len(checks) == 1
        assert c.answers() == [expected(b"x")] * 6

    run(scenario())
