"""What the server answers to one call from model code: an :class:`Answer` or a
:class:`CallError` (shared by the call client and the streams of streamed calls)."""

from __future__ import annotations

from tritium.ipc.call_records import Tensor
from tritium.ipc.messages import CallReply


class CallError(Exception):
    """The server answered a call with an error: ``code`` is a core error code name."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


class Answer:
    """The server's answer to one call: its message and output tensors."""

    __slots__ = ("message", "tensors")

    def __init__(self, message: CallReply, tensors: list[Tensor]) -> None:
        self.message = message
        self.tensors = tensors
