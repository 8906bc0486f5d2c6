"""The bytes of one HTTP/1.1 answer: status line, headers and body in one buffer.

``Content-Type``, ``Content-Length`` and ``Connection`` are written here; a handler's extra
headers come after them. The usual answer (keep-alive HTTP/1.1) starts from a cached prefix
per status and content type, so it costs one formatting operation.
"""

from __future__ import annotations

from tritium.frontends.http.messages import (
    CONTENT_BINARY,
    CONTENT_JSON,
    INFER_HEADER_LENGTH,
    HttpResponse,
)
from tritium.frontends.http.status import STATUS_LINES, status_line

# (status, content type) -> the head of a keep-alive HTTP/1.1 answer up to its length
_PREFIXES: dict[tuple[int, bytes | None], bytes] = {}


def _prefix(status: int, content_type: bytes | None) -> bytes:
    prefix = STATUS_LINES.get((status, False)) or status_line(status)
    if content_type is not None:
        prefix += b"Content-Type: " + content_type + b"\r\n"
    prefix += b"Content-Length: "
    if len(_PREFIXES) < 64:  # content types come from handlers: a handful
        _PREFIXES[(status, content_type)] = prefix
    return prefix


def response_bytes(response: HttpResponse, keep_alive: bool, http10: bool) -> bytes:
    """``response`` as written on the wire; ``Connection: close`` unless ``keep_alive``."""
    body = response.body
    if keep_alive and not http10:
        key = (response.status, response.content_type)
        prefix = _PREFIXES.get(key) or _prefix(*key)
        end = b"\r\n\r\n"
        if response.headers:
            end = b"".join([b"\r\n", *(n + b": " + v + b"\r\n" for n, v in response.headers)])
            end += b"\r\n"
        if type(body) is bytes:
            return b"%b%d%b%b" % (prefix, len(body), end, body)
        size = 0
        for chunk in body:
            size += len(chunk)  # type: ignore[arg-type]  # not bytes: a list of chunks
        return b"".join((b"%b%d%b" % (prefix, size, end), *body))
    parts: list[bytes | memoryview] = [
        STATUS_LINES.get((response.status, http10)) or status_line(response.status, http10)
    ]
    if response.content_type is not None:
        parts.append(b"Content-Type: " + response.content_type + b"\r\n")
    if response.headers:
        for name, value in response.headers:
            parts.append(name + b": " + value + b"\r\n")
    if type(body) is bytes:
        size = len(body)
    else:
        size = sum(len(chunk) for chunk in body)  # type: ignore[misc, arg-type]  # chunks
    parts.append(b"Content-Length: %d\r\n" % size)
    if not keep_alive:
        parts.append(b"Connection: close\r\n\r\n")
    else:  # HTTP/1.0 keep-alive is said explicitly
        parts.append(b"Connection: keep-alive\r\n\r\n")
    if type(body) is bytes:
        parts.append(body)
    else:
        parts.extend(body)  # type: ignore[arg-type]  # not bytes: a list of chunks
    return b"".join(parts)


_JSON_OK = _prefix(200, CONTENT_JSON)
_BINARY_OK = _prefix(200, CONTENT_BINARY)


def infer_ok_bytes(head: bytes, tail: bytes, json_length: int | None) -> bytes:
    """A successful infer's keep-alive HTTP/1.1 answer whose body is ``head`` + ``tail``
    (a JSON body, or a binary one whose JSON part is ``json_length`` long), byte for byte
    what :func:`response_bytes` writes for the handler's answer, in one formatting step."""
    size = len(head) + len(tail)
    if json_length is None:
        return b"%b%d\r\n\r\n%b%b" % (_JSON_OK, size, head, tail)
    return b"%b%d\r\n%b: %d\r\n\r\n%b%b" % (
        _BINARY_OK, size, INFER_HEADER_LENGTH, json_length, head, tail
    )
