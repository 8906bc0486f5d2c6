"""The httptools parser callbacks of an HTTP/1.1 connection: one request's target,
headers and body gathered, the header and body size limits applied, ``Expect:
100-continue`` answered, and the whole request handed on.
"""

from __future__ import annotations

import httptools

from tritium.frontends.http.compression import too_large_message
from tritium.frontends.http.messages import HttpResponse, error_response
from tritium.frontends.http.request_handling import RequestHandling
from tritium.frontends.http.response_writing import Slot

MAX_HEADER_BYTES = 64 * 1024
# RFC 6585's status for a head over the limit, on the HTTP and metrics ports alike (both
# run this code). Triton 2.51 answers neither: it resets the connection once a head
# passes ~8 KiB, and the client learns nothing; a status the client can act on is kept
# as a deliberate difference.
_HEADER_TOO_LARGE = 431
_CONTINUE = b"HTTP/1.1 100 Continue\r\n\r\n"


class RequestReading(RequestHandling):
    """Parser events of the connection's current request; see the module docstring."""

    _parser: httptools.HttpRequestParser
    _max_input_size: int
    _draining: bool
    _url: bytes
    _headers: dict[str, str]
    _raw_headers: list[tuple[bytes, bytes]]
    _header_bytes: int
    _body: list[bytes | bytearray]
    _body_size: int
    _too_large: bool
    _completed: int
    _plannable: tuple[str, str, str] | None

    def on_message_begin(self) -> None:
        if self._stop_parsing:
            return
        self._in_message = True
        self._url = b""
        self._headers = {}
        self._raw_headers = []
        self._header_bytes = 0
        self._body = []
        self._body_size = 0
        self._too_large = False

    def on_url(self, url: bytes) -> None:
        self._url += url
        self._header_bytes += len(url)
        if self._header_bytes > MAX_HEADER_BYTES and not self._stop_parsing:
            self._fail(error_response(_HEADER_TOO_LARGE, "request header too large"))

    def on_header(self, name: bytes, value: bytes) -> None:
        size = self._header_bytes + len(name) + len(value)
        self._header_bytes = size
        if size > MAX_HEADER_BYTES:
            if not self._stop_parsing:
                self._fail(error_response(_HEADER_TOO_LARGE, "request header too large"))
            return
        self._raw_headers.append((name, value))

    def on_headers_complete(self) -> None:
        if self._stop_parsing:
            return
        # Decoded once, here, rather than header by header in the parser callback.
        self._headers = {
            name.decode("latin-1").lower(): value.decode("latin-1")
            for name, value in self._raw_headers
        }
        length = self._headers.get("content-length")
        if length is not None and length.isdigit() and int(length) > self._max_input_size:
            self._too_large = True
        expect = self._headers.get("expect")
        if expect is not None and expect.lower() == "100-continue" and not self._queue:
            if self._too_large:
                # The client has not sent the body yet: refuse now, it never will.
                self._fail(self._too_large_response())
            else:
                self._transport.write(_CONTINUE)  # type: ignore[union-attr]

    def on_body(self, body: bytes) -> None:
        if self._too_large or self._stop_parsing:
            return  # drained and dropped, so the client still reads the answer
        self._body_size += len(body)
        if self._body_size > self._max_input_size:
            self._too_large = True
            self._body = []
        else:
            parts = self._body
            parts.append(body)
            if len(parts) > 256:
                # Many small chunks: gather them as they come, so the list stays short
                # and finishing the body is not one long join of a million pieces.
                gathered = parts[0] if type(parts[0]) is bytearray else bytearray(parts[0])
                gathered += b"".join(parts[1:])
                self._body = [gathered]

    def on_message_complete(self) -> None:
        self._in_message = False
        if self._stop_parsing:
            return
        parser = self._parser
        version = parser.get_http_version()
        http10 = version == "1.0"
        if not http10 and version != "1.1":
            # A request line without a version (HTTP/0.9) is not a request we answer.
            self._fail(error_response(400, "malformed HTTP request: no HTTP version"))
            return
        # An upgrade is never accepted, so nothing after such a request is HTTP/1.1.
        keep_alive = (
            parser.should_keep_alive() and not self._draining and not parser.should_upgrade()
        )
        self._completed += 1
        self._plannable = None
        if not keep_alive:
            self._stop_parsing = True
        if self._too_large:
            slot = Slot(keep_alive, http10)
            self._queue.append(slot)
            slot.response = self._too_large_response()
            self._stop_parsing = True
            if self._queue[0] is slot:
                self._flush()
            return
        method = parser.get_method().decode("ascii", "replace")
        path, query = _split_url(self._url)
        if keep_alive and not http10:
            self._plannable = (method, path, query)
        body = self._body
        self._body = []
        self._answer(
            keep_alive,
            method,
            path,
            query,
            self._headers,
            (body[0] if type(body[0]) is bytes else bytes(body[0]))
            if len(body) == 1
            else b"".join(body),
            http10,
        )

    def _too_large_response(self) -> HttpResponse:
        size = self._headers.get("content-length")
        response = error_response(
            400, too_large_message(int(size) if size else None, self._max_input_size)
        )
        response.close = True
        return response


def _split_url(url: bytes) -> tuple[str, str]:
    """(decoded path, query) of a request target; absolute forms keep their path."""
    if not url.startswith(b"/"):
        try:
            parsed = httptools.parse_url(url)
            url = (parsed.path or b"/") + (b"?" + parsed.query if parsed.query else b"")
        except httptools.HttpParserInvalidURLError:
            url = b"/"
    path, _, query = url.partition(b"?")
    return path.partition(b"#")[0].decode("latin-1"), query.decode("latin-1")
