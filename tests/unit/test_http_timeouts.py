"""HTTP/1.1 connection timeouts, driven by calling the sweep with a made-up clock.

Each phase has its own limit: idle between requests (keep-alive), the whole request head
(dribbled bytes do not restart it), and silence during a body. A connection whose
request is being handled is never timed out.
"""

from __future__ import annotations

import asyncio

from tests.unit.test_http_protocol import (
    INFER_BODY,
    IdentityService,
    get,
    parse_responses,
    settle,
)

from tritium.frontends.http.handlers import KServeRoutes
from tritium.frontends.http.protocol import _FEED_SLICE, _FULL_READ, HttpProtocol
from tritium.frontends.http.router import Router
from tritium.frontends.http.timeouts import HttpTimeouts
from tritium.frontends.sweep import sweep_period
from tritium.testing.fakes import FakeTransport

TIMEOUTS = HttpTimeouts(keep_alive=5, header=10, body=20)


def _protocol(router: Router | None = None) -> tuple[HttpProtocol, FakeTransport]:
    if router is None:
        router = Router()
        KServeRoutes(IdentityService(), 1 << 20).register(router)
    protocol = HttpProtocol(router, set(), max_input_size=1 << 20, timeouts=TIMEOUTS)
    transport = FakeTransport()
    protocol.connection_made(transport)
    return protocol, transport


def _sweep_until(
    protocol: HttpProtocol, transport: FakeTransport, start: float, end: float, step: float = 1.0
) -> float | None:
    """Sweep from ``start`` to ``end``; the time the connection closed, or None."""
    now = start
    while now <= end:
        protocol.sweep(now)
        if transport.closed:
            return now
        now += step
    return None


def test_idle_connection_closes_after_keep_alive_quietly():
    async def scenario():
        protocol, transport = _protocol()
        closed = _sweep_until(protocol, transport, 0.0, 60.0)
        assert closed is not None and 5.0 <= closed <= 6.0
        assert transport.data == b""  # no response for a request never sent

    asyncio.run(scenario())


def test_activity_restarts_the_keep_alive_clock():
    async def scenario():
        protocol, transport = _protocol()
        now = 0.0
        for _ in range(10):  # a request every 4 s: never 5 s idle
            protocol.sweep(now)
            protocol.sweep(now + 2)
            protocol.data_received(get("/v2/health/live"))
            await settle()
            now += 4.0
        assert not transport.closed
        assert [r[0] for r in parse_responses(transport.data)] == [200] * 10

    asyncio.run(scenario())


def test_dribbled_head_times_out_with_408():
    async def scenario():
        protocol, transport = _protocol()
        protocol.data_received(b"GET /v2/health/live HTTP/1.1\r\n")
        now = 0.0
        while not transport.closed and now < 60:
            protocol.sweep(now)
            protocol.data_received(b"X-A: b\r\n")  # a header line a second
            now += 1.0
        assert 10.0 <= now <= 12.0
        ((status, headers, body),) = parse_responses(transport.data)
        assert status == 408 and headers["connection"] == "close"
        assert b"request head" in body

    asyncio.run(scenario())


def test_stalled_body_times_out_with_408_but_a_slow_one_does_not():
    async def scenario():
        protocol, transport = _protocol()
        head = f"POST /v2/models/ident/infer HTTP/1.1\r\nContent-Length: {len(INFER_BODY)}\r\n\r\n"
        protocol.data_received(head.encode())
        # One byte every 15 s keeps a 20 s body timeout from firing...
        now = 0.0
        for byte in INFER_BODY[:3]:
            assert _sweep_until(protocol, transport, now, now + 15) is None
            protocol.data_received(bytes([byte]))
            now += 16.0
        # ...silence does not.
        closed = _sweep_until(protocol, transport, now, now + 60)
        assert closed is not None and closed - now <= 21.0
        assert parse_responses(transport.data)[0][0] == 408

    asyncio.run(scenario())


def test_a_request_being_handled_is_never_timed_out():
    async def scenario():
        router = Router()
        gate: asyncio.Future = asyncio.get_running_loop().create_future()

        async def slow(request, params):
            return await gate

        router.add("GET", "/slow", slow)
        protocol, transport = _protocol(router)
        protocol.data_received(b"GET /slow HTTP/1.1\r\nHost: x\r\n\r\n")
        await settle()
        assert _sweep_until(protocol, transport, 0.0, 600.0, step=10.0) is None

    asyncio.run(scenario())


def test_request_line_without_version_is_400():
    async def scenario():
        protocol, transport = _protocol()
        protocol.data_received(b"GET /v2/health/live\r\n\r\n")
        await settle()
        assert transport.data.startswith(b"HTTP/1.1 400 ")
        assert b"no HTTP version" in transport.data
        assert transport.closed

    asyncio.run(scenario())


def test_sweep_period_follows_the_shortest_enabled_timeout():
    assert sweep_period(0, 0) == 0.0
    assert sweep_period(75, 30, 60) == 1.0
    assert sweep_period(1, 0) == 0.25
    assert sweep_period(0.01) == 0.05


def test_a_big_read_is_parsed_a_slice_per_loop_iteration():
    """A body of many tiny chunks costs a parser callback each: one read of it must not
    hold the loop, so it is parsed a slice per iteration with reading paused meanwhile."""

    async def scenario():
        protocol, transport = _protocol()
        chunked = b"".join(b"1\r\n%s\r\n" % INFER_BODY[i : i + 1] for i in range(len(INFER_BODY)))
        head = (
            b"POST /v2/models/ident/infer HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
        )
        data = head + chunked + b"0\r\n\r\n" + get("/v2/health/live") * 25000
        assert len(data) > 3 * _FEED_SLICE
        protocol.data_received(data)
        assert transport.data == b"" and not transport.reading  # nothing parsed yet
        iterations = 0
        while len(parse_responses(transport.data)) < 25001 and iterations < 100:
            await asyncio.sleep(0)
            iterations += 1
        statuses = [r[0] for r in parse_responses(transport.data)]
        assert statuses == [200] * 25001
        assert iterations >= 3 and transport.reading

    asyncio.run(scenario())


def test_full_reads_handed_over_in_one_iteration_are_parsed_one_per_iteration():
    """The event loop reads a busy socket up to 32 times in one iteration: only the first
    full read is parsed at once, so a body of 1M one-byte chunks (6 MB of reads) cannot
    hold the loop for all of them (it was 140 ms)."""

    async def scenario():
        protocol, transport = _protocol()
        body = INFER_BODY.ljust(200_000, b" ")
        chunked = b"".join(b"1\r\n%s\r\n" % body[i : i + 1] for i in range(len(body)))
        head = (
            b"POST /v2/models/ident/infer HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
        )
        data = head + chunked + b"0\r\n\r\n"
        reads = [data[i : i + _FULL_READ] for i in range(0, len(data), _FULL_READ)]
        assert len(reads) >= 5
        for read in reads:  # all in one iteration, as the loop hands them over
            protocol.data_received(read)
        assert protocol._backlog is not None
        assert len(protocol._backlog) >= len(data) - 2 * _FULL_READ
        assert not transport.reading
        iterations = 0
        while not parse_responses(transport.data) and iterations < 100:
            await asyncio.sleep(0)
            iterations += 1
        ((status, _, reply),) = parse_responses(transport.data)
        assert status == 200 and b'"data":[1,2]' in reply
        assert iterations >= (len(data) - _FULL_READ) // _FEED_SLICE and transport.reading

    asyncio.run(scenario())


def test_a_body_of_thousands_of_tiny_chunks_arrives_whole():
    async def scenario():
        protocol, transport = _protocol()
        body = INFER_BODY.ljust(5000, b" ")
        chunked = b"".join(b"1\r\n%s\r\n" % body[i : i + 1] for i in range(len(body)))
        head = (
            b"POST /v2/models/ident/infer HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
        )
        for i in range(0, len(chunked), 1000):  # reads of ordinary size
            protocol.data_received((head if i == 0 else b"") + chunked[i : i + 1000])
        protocol.data_received(b"0\r\n\r\n")
        await settle()
        ((status, _, reply),) = parse_responses(transport.data)
        assert status == 200 and b'"data":[1,2]' in reply

    asyncio.run(scenario())
