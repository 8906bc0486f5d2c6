"""Repeated request heads: a connection's next request, read without the HTTP parser.

A client on a keep-alive connection sends the same request line and header block again and
again (``tritonclient``, ``perf_analyzer`` and load generators do; only the body changes,
not its length). Once a connection has sent the same head twice in a row, each in one read
holding exactly one request, the head is kept with what the parser made of it: method,
path, query and headers. A later read that is that head followed by exactly the body length
it declares is then that same request with a new body: byte-identical heads parse
identically, so the parser's callbacks, the header decoding and the URL splitting are
skipped, and a route with a quick answer (a response-cache replay) may answer it at
once. Anything else (another head, a partial or pipelined read, chunked bodies,
``Expect``, upgrades, HTTP/1.0, ``Connection: close``) goes through the parser as before.

A head is only kept after a fresh parser has confirmed where it ends: the request line and
headers end exactly at its last byte, so no body byte can be mistaken for part of it.
"""

from __future__ import annotations

import httptools

from tritium.frontends.http.router import Params, QuickAnswer

#: Heads longer than this are parsed every time (large headers are rare and not worth it).
MAX_HEAD = 8 * 1024


class RequestHead:
    """One parsed request head: its exact bytes and what they mean."""

    __slots__ = ("raw", "size", "method", "path", "query", "headers", "quick", "params")

    def __init__(
        self, raw: bytes, body_size: int, method: str, path: str, query: str, headers: dict
    ) -> None:
        self.raw = raw
        self.size = len(raw) + body_size  # of a whole read holding one such request
        self.method = method
        self.path = path
        self.query = query
        self.headers = headers  # shared by every request with this head: read-only
        # the route's quick answer and its path parameters (see router.QuickAnswer)
        self.quick: QuickAnswer | None = None
        self.params: Params = {}


class _HeadEnd:
    """Parser callbacks that note where the header block ends, and nothing else."""

    __slots__ = ("headers_done", "body_seen", "complete")

    def __init__(self) -> None:
        self.headers_done = False
        self.body_seen = False
        self.complete = False

    def on_headers_complete(self) -> None:
        self.headers_done = True

    def on_body(self, body: bytes) -> None:
        self.body_seen = True

    def on_message_complete(self) -> None:
        self.complete = True


def head_ends_at_end(raw: bytes, body_size: int) -> bool:
    """True when ``raw`` is exactly one request line and header block (with its blank
    line), as a parser reads it: the headers end at its last byte, no body byte precedes
    that, and a request without a body is complete there."""
    end = _HeadEnd()
    parser = httptools.HttpRequestParser(end)
    try:
        parser.feed_data(raw)
    except httptools.HttpParserError:
        return False
    if not end.headers_done or end.body_seen:
        return False
    return end.complete == (body_size == 0)


def planned_head(
    raw: bytes,
    body_size: int,
    method: str,
    path: str,
    query: str,
    headers: dict[str, str],
) -> RequestHead | None:
    """The head to keep for ``raw``, or None when its requests must always be parsed.

    The caller has parsed one whole request, read in one piece, whose first ``len(raw)``
    bytes were the head and whose last ``body_size`` bytes the body; it kept it alive as
    HTTP/1.1 without an upgrade.
    """
    if len(raw) > MAX_HEAD or "transfer-encoding" in headers or "expect" in headers:
        return None
    length = headers.get("content-length")
    if length is None:
        if body_size:
            return None
    elif not (length.isascii() and length.isdigit()) or int(length) != body_size:
        return None
    if not head_ends_at_end(raw, body_size):
        return None
    return RequestHead(raw, body_size, method, path, query, headers)
