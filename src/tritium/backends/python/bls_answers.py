"""What the server answers to one call from model code: an :class:`Answer` or a
:class:`CallError` (shared by the call client and the streams of streamed calls)."""

from __future__ import annotations

from typing import Any

from tritium.ipc.call_records import Tensor


class CallError(Exception):
    """The server answered a call with an error: ``code`` is a core error code name."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


class Answer:
    """The server's answer to one call: its document and output tensors."""

    __slots__ = ("message", "tensors")

    def __init__(self, message: dict[str, Any], tensors: list[Tensor]) -> None:
        self.message = message
        self.tensors = tensors
