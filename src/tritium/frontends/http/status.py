"""HTTP status codes: the one error-code table, reason phrases, and the error body.

The table copies Triton's ``HttpCodeFromError``: only INTERNAL, NOT_FOUND, UNAVAILABLE
and UNSUPPORTED have their own status; every other code (INVALID_ARG, UNKNOWN,
ALREADY_EXISTS, CANCELLED) is 400, exactly as Triton's HTTP endpoint answers.
"""

from __future__ import annotations

import orjson

from tritium.core.errors import Code, TritiumError

HTTP_STATUS: dict[Code, int] = {
    Code.INVALID_ARG: 400,
    Code.UNKNOWN: 400,
    Code.ALREADY_EXISTS: 400,
    Code.CANCELLED: 400,
    Code.NOT_FOUND: 404,
    Code.INTERNAL: 500,
    Code.UNSUPPORTED: 501,
    Code.UNAVAILABLE: 503,
}

REASONS: dict[int, str] = {
    100: "Continue",
    200: "OK",
    400: "Bad Request",
    403: "Forbidden",
    404: "Not Found",
    405: "Method Not Allowed",
    408: "Request Timeout",
    409: "Conflict",
    413: "Payload Too Large",
    431: "Request Header Fields Too Large",
    500: "Internal Server Error",
    501: "Not Implemented",
    503: "Service Unavailable",
}


def status_for(error: TritiumError) -> int:
    return HTTP_STATUS.get(error.code, 500)


def error_body(message: str) -> bytes:
    """Triton's error body: ``{"error": "<message>"}``."""
    return orjson.dumps({"error": message})


def status_line(status: int, http10: bool = False) -> bytes:
    reason = REASONS.get(status, "Unknown")
    return f"HTTP/1.{0 if http10 else 1} {status} {reason}\r\n".encode("latin-1")


# Precomputed for the hot path: (status, is HTTP/1.0) -> status line.
STATUS_LINES: dict[tuple[int, bool], bytes] = {
    (code, http10): status_line(code, http10) for code in REASONS for http10 in (False, True)
}
