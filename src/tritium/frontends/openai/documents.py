"""The JSON documents OpenAI's API answers with, as bytes: whole completions, stream
chunks, the usage chunk, and the SSE framing with its ``data: [DONE]`` end.

A stream's constant parts (id, object, created, model) are encoded once per request in a
:class:`Shape`; each token's chunk is then that prefix, the JSON string of the text, and a
constant suffix, so a chunk costs one string encoding.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

import orjson

#: The last event of every stream.
DONE = b"data: [DONE]\n\n"


def sse_event(data: bytes) -> bytes:
    """One Server-Sent Event carrying a JSON document (no newlines in it)."""
    return b"data: " + data + b"\n\n"


def usage_document(input_tokens: int | None, output_tokens: int | None) -> dict[str, int] | None:
    """OpenAI's ``usage``, only when the model reported both counts (never invented)."""
    if input_tokens is None or output_tokens is None:
        return None
    return {
        "prompt_tokens": input_tokens,
        "completion_tokens": output_tokens,
        "total_tokens": input_tokens + output_tokens,
    }


class Shape:
    """One request's answer: ids, and the pre-encoded parts of its chunks."""

    __slots__ = ("chat", "model", "id", "created", "_head", "_text_start", "_text_end")

    def __init__(self, chat: bool, model: str) -> None:
        self.chat = chat
        self.model = model
        self.id = ("chatcmpl-" if chat else "cmpl-") + uuid.uuid4().hex
        # A timestamp for the client (wall clock by definition), not a deadline.
        self.created = int(time.time())
        kind = "chat.completion.chunk" if chat else "text_completion"
        head = orjson.dumps(
            {"id": self.id, "object": kind, "created": self.created, "model": model}
        )
        self._head = head[:-1] + b',"choices":['
        if chat:
            self._text_start = self._head + b'{"index":0,"delta":{"content":'
            self._text_end = b'},"logprobs":null,"finish_reason":null}]}'
        else:
            self._text_start = self._head + b'{"index":0,"text":'
            self._text_end = b',"logprobs":null,"finish_reason":null}]}'

    def text_event(self, text: str) -> bytes:
        """The SSE event of one piece of generated text."""
        return b"data: " + self._text_start + orjson.dumps(text) + self._text_end + b"\n\n"

    def role_event(self) -> bytes:
        """Chat streams open with the assistant's role, as OpenAI's do."""
        choice = {
            "index": 0,
            "delta": {"role": "assistant", "content": ""},
            "logprobs": None,
            "finish_reason": None,
        }
        return sse_event(self._head + orjson.dumps(choice) + b"]}")

    def finish_event(self, finish_reason: str) -> bytes:
        """The chunk that ends the choice: no text, its ``finish_reason``."""
        choice: dict[str, Any] = {"index": 0}
        if self.chat:
            choice["delta"] = {}
        else:
            choice["text"] = ""
        choice["logprobs"] = None
        choice["finish_reason"] = finish_reason
        return sse_event(self._head + orjson.dumps(choice) + b"]}")

    def usage_event(self, usage: dict[str, int]) -> bytes:
        """``stream_options.include_usage``: the chunk with no choices and the usage."""
        return sse_event(self._head + b'],"usage":' + orjson.dumps(usage) + b"}")

    def whole(self, text: str, finish_reason: str, usage: dict[str, int] | None) -> bytes:
        """A non-streamed answer: one ``text_completion`` or ``chat.completion``."""
        choice: dict[str, Any] = {"index": 0}
        if self.chat:
            choice["message"] = {"role": "assistant", "content": text}
        else:
            choice["text"] = text
        choice["logprobs"] = None
        choice["finish_reason"] = finish_reason
        doc: dict[str, Any] = {
            "id": self.id,
            "object": "chat.completion" if self.chat else "text_completion",
            "created": self.created,
            "model": self.model,
            "choices": [choice],
        }
        if usage is not None:
            doc["usage"] = usage
        return orjson.dumps(doc)


def error_event(document: dict[str, Any]) -> bytes:
    """An error once the stream has started: ``data: {"error": {...}}``."""
    return sse_event(orjson.dumps(document))


def model_document(name: str, created: int, owner: str) -> dict[str, Any]:
    return {"id": name, "object": "model", "created": created, "owned_by": owner}
