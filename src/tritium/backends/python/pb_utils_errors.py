"""``TritonError`` and ``TritonModelException`` as Triton's Python backend defines them.

``TritonError`` is a value object (not an exception) that a model puts into an
``InferenceResponse``; ``TritonModelException`` is what the utilities raise when a model
misuses them. Error codes are ``TRITONSERVER_Error_Code`` integers; their names match
``tritium.core.errors.Code`` so the worker maps one onto the other by name.
"""

from __future__ import annotations

import enum


class ErrorCode(enum.IntEnum):
    """``TRITONSERVER_Error_Code`` values, exposed as ``TritonError.<NAME>``."""

    UNKNOWN = 0
    INTERNAL = 1
    NOT_FOUND = 2
    INVALID_ARG = 3
    UNAVAILABLE = 4
    UNSUPPORTED = 5
    ALREADY_EXISTS = 6
    CANCELLED = 7


class TritonModelException(Exception):
    """Raised by the utilities when a model uses them wrongly (Triton's exception type)."""


class TritonError:
    """An error a model attaches to an ``InferenceResponse``.

    ``TritonError(message, code=TritonError.INTERNAL)``; like Triton's, it is not an
    exception and cannot be raised.
    """

    __slots__ = ("_message", "_code")

    UNKNOWN = ErrorCode.UNKNOWN
    INTERNAL = ErrorCode.INTERNAL
    NOT_FOUND = ErrorCode.NOT_FOUND
    INVALID_ARG = ErrorCode.INVALID_ARG
    UNAVAILABLE = ErrorCode.UNAVAILABLE
    UNSUPPORTED = ErrorCode.UNSUPPORTED
    ALREADY_EXISTS = ErrorCode.ALREADY_EXISTS
    CANCELLED = ErrorCode.CANCELLED

    def __init__(self, message: str, code: ErrorCode | int = ErrorCode.INTERNAL) -> None:
        if not isinstance(message, str):
            raise TypeError(f"TritonError message must be a str, got {type(message)}")
        try:
            self._code = ErrorCode(code)
        except ValueError:
            raise TypeError(
                f"TritonError code must be one of TritonError's codes, got {code!r}"
            ) from None
        self._message = message

    def message(self) -> str:
        return self._message

    def code(self) -> ErrorCode:
        return self._code

    def __repr__(self) -> str:
        return f"TritonError({self._message!r}, code=TritonError.{self._code.name})"


# pb_utils.TritonError codes (Triton's TRITONSERVER_Error_Code order) -> core Code names.
CODE_NAMES = (
    "UNKNOWN",
    "INTERNAL",
    "NOT_FOUND",
    "INVALID_ARG",
    "UNAVAILABLE",
    "UNSUPPORTED",
    "ALREADY_EXISTS",
    "CANCELLED",
)


def error_pair(error: TritonError) -> tuple[str, str]:
    """``(core code name, message)`` of a model's error, as a reply carries it."""
    code = error.code()
    name = CODE_NAMES[code] if isinstance(code, int) and 0 <= code < len(CODE_NAMES) else "INTERNAL"
    return (name, error.message())


def describe(exc: BaseException) -> str:
    """``Type: text`` of an exception model code raised, for the error a client sees."""
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
