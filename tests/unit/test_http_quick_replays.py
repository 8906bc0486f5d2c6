"""Response-cache replays answered at once for a connection's repeated request head.

Driven through the real HTTP protocol and routes over a fake transport: the quick answer
is byte for byte the one the full path writes, counts as the hit it is, never reaches the
service's submit, and gives way to the full path whenever it could change what or when a
connection is answered (a request still waiting before it, a restricted route, debug logs,
a request the replay does not know).
"""

from __future__ import annotations

import asyncio
import logging

import pytest
from tests.unit.test_http_protocol import parse_responses
from tests.unit.test_response_cache_reuse import MODEL, _cache, _http_body, _Service

from tritium.frontends.http.handlers import KServeRoutes
from tritium.frontends.http.messages import HttpResponse
from tritium.frontends.http.protocol import HttpProtocol
from tritium.frontends.http.reused_bodies import replay_key
from tritium.frontends.http.router import Router
from tritium.frontends.restricted import RestrictedApis
from tritium.testing.fakes import FakeTransport

PATH = f"/v2/models/{MODEL}/infer"


def _request(request_id: str | None, binary_input: bool = True) -> bytes:
    body, length = _http_body(request_id, None, False, binary_input)
    extra = b"Inference-Header-Content-Length: %d\r\n" % length if binary_input else b""
    return (
        b"POST %s HTTP/1.1\r\nHost: h\r\n%bContent-Length: %d\r\n\r\n"
        % (PATH.encode(), extra, len(body))
    ) + body


class _Connection:
    """One protocol over routes on a cache; ``send`` feeds a read and returns what it
    wrote."""

    def __init__(self, restricted: RestrictedApis | None = None) -> None:
        self.cache = _cache()
        self.service = _Service(self.cache)
        self.router = Router(restricted)
        KServeRoutes(self.service, 1 << 30).register(self.router)  # type: ignore[arg-type]
        self.protocol = HttpProtocol(self.router, set(), max_input_size=1 << 30)
        self.transport = FakeTransport()
        self.protocol.connection_made(self.transport)

    def send(self, data: bytes) -> bytes:
        before = len(self.transport.data)
        self.protocol.data_received(data)
        return bytes(self.transport.data[before:])

    def quick(self) -> bool:
        head = self.protocol._head
        return head is not None and head.quick is not None


@pytest.mark.parametrize("binary_input", [True, False])
def test_repeated_heads_are_answered_quickly_with_the_full_paths_bytes(
    binary_input: bool,
) -> None:
    async def main() -> None:
        conn = _Connection()
        full = [conn.send(_request(str(n), binary_input)) for n in range(1, 4)]
        # The miss, a hit filed as a replay, and its replay (the head now planned).
        assert conn.service.submitted == 2
        assert conn.quick()
        stats = conn.cache.stats
        hits, successes = stats.cache_hit.count, stats.success.count
        for request_id in ("3", "1234567", None):
            answer = conn.send(_request(request_id, binary_input))
            assert conn.service.submitted == 2  # never decoded or submitted
            (status, headers, body), = parse_responses(answer)
            assert status == 200
            if request_id == "3":
                assert answer == full[2]  # the same request: the same bytes
            elif request_id is not None:
                assert body.startswith(b'{"id":"1234567",')
            else:
                assert body.startswith(b'{"model_name"')
        assert stats.cache_hit.count == hits + 3  # hits as they count anywhere
        assert stats.success.count == successes + 3

    asyncio.run(main())


def test_quick_answers_match_the_handlers_answer_byte_for_byte() -> None:
    async def main() -> None:
        conn = _Connection()
        for n in range(3):
            conn.send(_request(str(n)))
        quick = conn.send(_request("quick-9"))
        # The same request through the handler (a fresh connection has no head yet).
        other = HttpProtocol(conn.router, set(), max_input_size=1 << 30)
        transport = FakeTransport()
        other.connection_made(transport)
        other.data_received(_request("quick-9"))
        assert quick == bytes(transport.data)
        assert conn.service.submitted == 2

    asyncio.run(main())


def test_a_request_waiting_before_it_keeps_the_answer_order() -> None:
    async def main() -> None:
        conn = _Connection()
        release = asyncio.Event()

        async def slow(request: object, params: object) -> HttpResponse:
            await release.wait()
            return HttpResponse(200, b"slow")

        conn.router.add("GET", "/slow", slow)
        for n in range(3):
            conn.send(_request(str(n)))
        assert conn.quick()
        assert conn.send(b"GET /slow HTTP/1.1\r\nHost: h\r\n\r\n") == b""
        # The next request repeats the head but must not overtake /slow's answer.
        assert conn.send(_request("after")) == b""
        release.set()
        for _ in range(10):
            await asyncio.sleep(0)
        answers = parse_responses(bytes(conn.transport.data))
        assert answers[-2][2] == b"slow"
        assert answers[-1][2].startswith(b'{"id":"after",')

    asyncio.run(main())


def test_unknown_requests_take_the_full_path() -> None:
    async def main() -> None:
        conn = _Connection()
        for n in range(3):
            conn.send(_request(str(n)))
        body, length = _http_body("x", None, False, True)
        other = body[:-1] + b"\x01"  # another input value, same length: same head
        head = (
            b"POST %s HTTP/1.1\r\nHost: h\r\nInference-Header-Content-Length: %d\r\n"
            b"Content-Length: %d\r\n\r\n" % (PATH.encode(), length, len(other))
        )
        (status, _, _), = parse_responses(conn.send(head + other))
        assert status == 200 and conn.service.submitted == 3  # a miss, run

    asyncio.run(main())


def test_restricted_routes_and_debug_logs_offer_no_quick_answer(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def main() -> None:
        restricted = RestrictedApis.parse(["inference:key=secret"], "--http-restricted-api")
        conn = _Connection(restricted)
        for n in range(4):
            (status, _, _), = parse_responses(conn.send(_request(str(n))))
            assert status == 403  # the restriction is checked on every request
        assert conn.protocol._head is not None and not conn.quick()
        with caplog.at_level(logging.DEBUG, logger="tritium.frontends.http"):
            conn = _Connection()
            for n in range(4):
                conn.send(_request(str(n)))
            assert conn.protocol._head is not None and not conn.quick()
            assert conn.service.submitted == 2  # replays still answer, through the handler

    asyncio.run(main())


def test_the_replay_key_ignores_only_a_leading_plain_id() -> None:
    body, length = _http_body("17", None, False, True)
    keyed = replay_key(MODEL, "", body, str(length))
    assert keyed is not None and keyed.request_id == "17"
    unnumbered, bare_length = _http_body(None, None, False, True)
    bare = replay_key(MODEL, "", unnumbered, str(bare_length))
    assert bare is not None and bare.key == keyed.key and bare.request_id == ""
    escaped, escaped_length = _http_body('a"b', None, False, True)
    assert replay_key(MODEL, "", escaped, str(escaped_length)) is None
    # An id that ends where the JSON header does is no id member.
    cut = b'{"id":"1"' + b',"rest"'
    assert replay_key(MODEL, "", cut, "9") is None
    assert replay_key(MODEL, "", body, "x") is None
    assert replay_key(MODEL, "", body, str(len(body) + 1)) is None
