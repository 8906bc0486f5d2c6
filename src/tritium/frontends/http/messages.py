"""The request and response objects handlers see; no I/O here.

A handler receives an :class:`HttpRequest` (method, decoded path, lower-cased headers,
whole body) and returns an :class:`HttpResponse`. The protocol serializes responses;
handlers never touch the transport.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import orjson

from tritium.core.completion import Completion
from tritium.core.errors import TritiumError
from tritium.frontends.http.status import error_body, status_for

logger = logging.getLogger("tritium.frontends.http")

CONTENT_JSON = b"application/json"
CONTENT_TEXT = b"text/plain"
CONTENT_BINARY = b"application/octet-stream"
#: The header of a binary infer body: the length of its JSON part.
INFER_HEADER_LENGTH = b"Inference-Header-Content-Length"


@dataclass(slots=True)
class HttpRequest:
    method: str
    path: str
    query: str = ""
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b""
    http10: bool = False


@dataclass(slots=True)
class HttpResponse:
    """``body`` is bytes or a list of byte chunks written back to back.

    ``headers`` are extra header lines (name, value) besides Content-Type,
    Content-Length and Connection, which the protocol writes itself.
    """

    status: int = 200
    body: bytes | list[bytes | memoryview] = b""
    content_type: bytes | None = CONTENT_JSON
    headers: list[tuple[bytes, bytes]] | None = None
    close: bool = False


@dataclass(slots=True)
class DeferredResponse:
    """A response that is not ready yet: ``finish(future)`` builds it once ``future``
    completes. Lets a handler answer without a task or coroutine on the hot path;
    cancelling ``future`` (the client went away) abandons the work."""

    future: Completion
    #: An awaitable when the answer is finished off the event loop (a task awaits it).
    finish: Callable[[Completion], HttpResponse | Awaitable[HttpResponse]]


def json_response(obj: object, status: int = 200) -> HttpResponse:
    return HttpResponse(status, orjson.dumps(obj), CONTENT_JSON)


def error_response(
    status: int, message: str, content_type: bytes | None = CONTENT_JSON
) -> HttpResponse:
    return HttpResponse(status, error_body(message), content_type)


def from_error(error: TritiumError, content_type: bytes | None = CONTENT_JSON) -> HttpResponse:
    return HttpResponse(status_for(error), error_body(error.message), content_type)


def internal_error(exc: BaseException, what: str) -> HttpResponse:
    """A 500 for an unexpected failure in ``what``; the traceback goes to the log, never
    to the client."""
    logger.error("unexpected error in %s", what, exc_info=exc)
    return error_response(500, f"internal error in {what}")


EMPTY_OK = HttpResponse(200, b"", CONTENT_TEXT)
NOT_FOUND = error_response(404, "Not Found", CONTENT_TEXT)
METHOD_NOT_ALLOWED = error_response(405, "Method Not Allowed", CONTENT_TEXT)
