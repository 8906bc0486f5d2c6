"""One generation in flight: the model's responses turned into an OpenAI answer.

:class:`StreamedGeneration` sends a chunk per response as it arrives (text decoded
incrementally, so a character split across two responses is never mangled), then the
finish chunk, the usage chunk when asked for and known, and ``data: [DONE]``.
:class:`CollectedGeneration` gathers every response and answers one document.

Both take the service's stream callback ``(call, response | None, final)`` of a decoupled
model, or the completion of a model that answers once (``on_done``). A failure before the
stream started is an OpenAI error with its status; after, an ``{"error": ...}`` event,
then ``[DONE]``.
"""

from __future__ import annotations

import codecs
import logging
from typing import Any

from tritium.core.completion import Completion
from tritium.core.errors import TritiumError
from tritium.core.types import InferResponse
from tritium.frontends.http.event_stream import EventStream
from tritium.frontends.http.messages import CONTENT_JSON, HttpResponse
from tritium.frontends.openai.documents import DONE, Shape, error_event, usage_document
from tritium.frontends.openai.errors import OpenAIError, from_tritium, internal_error
from tritium.frontends.openai.text_model import TextModel

log = logging.getLogger("tritium.frontends.openai")


class _Tokens:
    """Token counts as the responses report them (None until one does), and the number
    of responses that carried text."""

    __slots__ = ("input", "output", "pieces")

    def __init__(self) -> None:
        self.input: int | None = None
        self.output: int | None = None
        self.pieces = 0

    def add(self, input_tokens: int | None, output_tokens: int | None, text: bytes) -> None:
        if input_tokens is not None and (self.input is None or input_tokens > self.input):
            self.input = input_tokens
        if output_tokens is not None:
            self.output = output_tokens + (self.output or 0)
        if text:
            self.pieces += 1

    def finish_reason(self, max_tokens: int | None) -> str:
        """``length`` when the model generated ``max_tokens``, else ``stop``. The count
        is the model's when it reports one; else a response with text counts as a token
        (what a streaming model sends: one response per token)."""
        generated = self.output if self.output is not None else self.pieces
        if max_tokens is not None and generated >= max_tokens:
            return "length"
        return "stop"


def _error_of(exc: BaseException) -> OpenAIError:
    if isinstance(exc, TritiumError):
        return from_tritium(exc)
    log.error("unexpected error in an OpenAI request", exc_info=exc)
    return internal_error("the generation")


class StreamedGeneration:
    """A streamed answer: ``text_completion`` or ``chat.completion.chunk`` events."""

    __slots__ = ("events", "_shape", "_decode", "_tokens", "_max_tokens", "_usage", "_failed")

    def __init__(
        self, events: EventStream, shape: Shape, max_tokens: int | None, include_usage: bool
    ) -> None:
        self.events = events
        self._shape = shape
        self._decode = codecs.getincrementaldecoder("utf-8")("replace").decode
        self._tokens = _Tokens()
        self._max_tokens = max_tokens
        self._usage = include_usage
        self._failed = False
        if shape.chat:
            events.send(shape.role_event())

    def on_response(self, call: Any, response: InferResponse | None, final: bool) -> None:
        if response is not None:
            self._take(response)
        if final:
            self._end()

    def on_done(self, done: Completion) -> None:
        """A model that answers once."""
        if done.cancelled():
            return
        exc = done.exception()
        if exc is not None:
            self._fail(_error_of(exc))
        else:
            self._take(done.result())
        self._end()

    def _take(self, response: InferResponse) -> None:
        if self._failed:
            return
        if response.error is not None:
            self._fail(from_tritium(response.error))
            return
        piece = TextModel.read(response)
        self._tokens.add(piece.input_tokens, piece.output_tokens, piece.text)
        text = self._decode(piece.text)
        if text:
            self.events.send(self._shape.text_event(text))

    def _fail(self, error: OpenAIError) -> None:
        self._failed = True
        self.events.send(error_event(error.document()))

    def _end(self) -> None:
        events = self.events
        if not self._failed:
            shape = self._shape
            tail = self._decode(b"", True)
            if tail:
                events.send(shape.text_event(tail))
            events.send(shape.finish_event(self._tokens.finish_reason(self._max_tokens)))
            usage = usage_document(self._tokens.input, self._tokens.output)
            if self._usage and usage is not None:
                events.send(shape.usage_event(usage))
        events.send(DONE)
        events.end()


class CollectedGeneration:
    """A whole answer: every response gathered, then one document."""

    __slots__ = ("answer", "call", "_shape", "_texts", "_tokens", "_max_tokens", "_error")

    def __init__(self, shape: Shape, max_tokens: int | None) -> None:
        self.answer: Completion[HttpResponse] = Completion()
        self.call: Any = None
        self._shape = shape
        self._texts: list[bytes] = []
        self._tokens = _Tokens()
        self._max_tokens = max_tokens
        self._error: OpenAIError | None = None

    def on_response(self, call: Any, response: InferResponse | None, final: bool) -> None:
        if response is not None:
            self._take(response)
        if final and not self.answer.done():
            self.answer.set_result(self._build())

    def on_done(self, done: Completion) -> None:
        if done.cancelled() or self.answer.done():
            return
        exc = done.exception()
        if exc is not None:
            self._error = _error_of(exc)
        else:
            self._take(done.result())
        self.answer.set_result(self._build())

    def _take(self, response: InferResponse) -> None:
        if response.error is not None:
            if self._error is None:
                self._error = from_tritium(response.error)
            return
        piece = TextModel.read(response)
        self._tokens.add(piece.input_tokens, piece.output_tokens, piece.text)
        self._texts.append(piece.text)

    def _build(self) -> HttpResponse:
        if self._error is not None:
            return self._error.response()
        text = b"".join(self._texts).decode("utf-8", "replace")
        tokens = self._tokens
        body = self._shape.whole(
            text,
            tokens.finish_reason(self._max_tokens),
            usage_document(tokens.input, tokens.output),
        )
        return HttpResponse(200, body, CONTENT_JSON)

    def abandoned(self, answer: Completion) -> None:
        """The client went away before the answer: cancel the request in the model."""
        if answer.cancelled() and self.call is not None:
            self.call.cancel()


def collected_answer(done: Completion) -> HttpResponse:
    """``DeferredResponse.finish`` of a collected generation (its answer never fails)."""
    return done.result()
