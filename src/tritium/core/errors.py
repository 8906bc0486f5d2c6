"""One error tree for the whole server, carrying Triton's status codes.

Everything below the frontends raises these; each frontend maps ``code`` to its wire
status in exactly one table (HTTP status, gRPC code). Messages are client-safe: they
never contain internal paths, shared-memory names or tracebacks.
"""

from __future__ import annotations

import enum


class Code(enum.Enum):
    """Triton's server error codes (TRITONSERVER_Error_Code)."""

    UNKNOWN = "UNKNOWN"
    INTERNAL = "INTERNAL"
    NOT_FOUND = "NOT_FOUND"
    INVALID_ARG = "INVALID_ARG"
    UNAVAILABLE = "UNAVAILABLE"
    UNSUPPORTED = "UNSUPPORTED"
    ALREADY_EXISTS = "ALREADY_EXISTS"
    CANCELLED = "CANCELLED"


class TritiumError(Exception):
    """Root of every error a client can see."""

    code: Code = Code.INTERNAL

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def __str__(self) -> str:
        return self.message


class InvalidArgument(TritiumError):
    code = Code.INVALID_ARG


class NotFound(TritiumError):
    code = Code.NOT_FOUND


class Unavailable(TritiumError):
    code = Code.UNAVAILABLE


class Rejected(Unavailable):
    """The scheduler refused the request: its queue was full, or it waited past its
    queue timeout. Counted as ``reason="REJECTED"`` in the failure metrics."""


class InstanceDown(Unavailable):
    """An instance could not take a batch because it is not running (crashed, being
    restarted). Nothing reached the worker, so a scheduler keeps the batch queued for the
    restart or another instance instead of failing it; a batch a worker was running when
    it died fails with a plain ``Unavailable`` instead (it was lost)."""


class InternalError(TritiumError):
    code = Code.INTERNAL


class Unsupported(TritiumError):
    code = Code.UNSUPPORTED


class DecoupledRefused(Unsupported):
    """A unary call to a model with the decoupled transaction policy, which answers only
    on a stream; each frontend words it as Triton does."""


class AlreadyExists(TritiumError):
    code = Code.ALREADY_EXISTS


class Cancelled(TritiumError):
    code = Code.CANCELLED


class UnknownError(TritiumError):
    code = Code.UNKNOWN


_BY_CODE: dict[Code, type[TritiumError]] = {
    cls.code: cls
    for cls in (
        InvalidArgument,
        NotFound,
        Unavailable,
        InternalError,
        Unsupported,
        AlreadyExists,
        Cancelled,
        UnknownError,
    )
}


def error_from_code(code: Code | str, message: str) -> TritiumError:
    """Build the error class for ``code`` (a Code or its name)."""
    if isinstance(code, str):
        code = Code[code] if code in Code.__members__ else Code.INTERNAL
    return _BY_CODE[code](message)
