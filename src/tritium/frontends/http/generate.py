"""Triton's generate extension: ``POST .../generate`` (one JSON answer) and
``.../generate_stream`` (Server-Sent Events, one ``data:`` event per response).

A request that fails before inference answers a JSON error with its status, as every
endpoint does; once a stream has started, errors are ``{"error": ...}`` events and the
stream goes on until the request's final response. A client that goes away (or stops
reading) cancels its request: queued, it is dropped; running, the model sees
``is_cancelled()``.
"""

from __future__ import annotations

import logging
from typing import Any

from tritium.core.completion import Completion
from tritium.core.errors import InternalError, InvalidArgument, TritiumError
from tritium.core.types import InferResponse
from tritium.frontends.http.event_stream import EventStream
from tritium.frontends.http.generate_codec import (
    decode_generate_request,
    error_json,
    generate_response_json,
    sse_event,
)
from tritium.frontends.http.messages import (
    CONTENT_JSON,
    DeferredResponse,
    HttpRequest,
    HttpResponse,
    error_response,
    from_error,
)
from tritium.frontends.http.router import Params, Router

logger = logging.getLogger("tritium.frontends.http")

GENERATE_ONE_RESPONSE = (
    "generate expects model to produce exactly 1 response, use generate stream for model "
    "that generates various number of responses"
)


def _one_json(response: InferResponse, request_id: str) -> bytes:
    if response.error is not None:
        raise response.error
    return generate_response_json(response, request_id)


class _Generate:
    """One ``/generate`` call: exactly one response, answered as one JSON object."""

    __slots__ = ("request_id", "answer", "responses", "call")

    def __init__(self, request_id: str) -> None:
        self.request_id = request_id
        self.answer: Completion[HttpResponse] = Completion()
        self.responses: list[InferResponse] = []
        self.call: Any = None

    def on_response(self, call: Any, response: InferResponse | None, final: bool) -> None:
        if response is not None:
            self.responses.append(response)
        if final and not self.answer.done():
            self.answer.set_result(self._build())

    def on_done(self, done: Completion) -> None:
        """A model that is not decoupled: its one response."""
        if done.cancelled() or self.answer.done():
            return
        exc = done.exception()
        if exc is not None:
            self.answer.set_exception(exc)
            return
        self.responses.append(done.result())
        self.answer.set_result(self._build())

    def _build(self) -> HttpResponse:
        errors = [r.error for r in self.responses if r.error is not None]
        if errors:
            return from_error(errors[0])
        if len(self.responses) != 1:
            # Triton's text; it answers it with status 200 (the status line is out before
            # the second response), tritium with 400 before anything is written.
            return from_error(InvalidArgument(GENERATE_ONE_RESPONSE))
        return HttpResponse(200, _one_json(self.responses[0], self.request_id), CONTENT_JSON)

    def abandoned(self, answer: Completion) -> None:
        if answer.cancelled() and self.call is not None:
            self.call.cancel()


class _GenerateStream:
    """One ``/generate_stream`` call: an SSE event per response."""

    __slots__ = ("request_id", "events")

    def __init__(self, request_id: str, events: EventStream) -> None:
        self.request_id = request_id
        self.events = events

    def on_response(self, call: Any, response: InferResponse | None, final: bool) -> None:
        if response is not None:
            self._send(response)
        if final:
            self.events.end()

    def on_done(self, done: Completion) -> None:
        if done.cancelled():
            return
        exc = done.exception()
        if exc is not None:
            self.events.send(sse_event(error_json(_message(exc))))
        else:
            self._send(done.result())
        self.events.end()

    def _send(self, response: InferResponse) -> None:
        if response.error is not None:
            data = error_json(response.error.message)
        else:
            try:
                data = generate_response_json(response, self.request_id)
            except TritiumError as exc:
                data = error_json(exc.message)
        self.events.send(sse_event(data))


def _message(exc: BaseException) -> str:
    if isinstance(exc, TritiumError):
        return exc.message
    logger.error("unexpected error in generate_stream", exc_info=exc)
    return InternalError("internal error in generate_stream").message


class GenerateRoutes:
    def __init__(self, service: Any) -> None:
        self._service = service

    def register(self, router: Router) -> None:
        for base in ("/v2/models/{model}", "/v2/models/{model}/versions/{version:int}"):
            router.add("POST", base + "/generate", self.generate)
            router.add("POST", base + "/generate_stream", self.generate_stream)

    def _decode(self, request: HttpRequest, params: Params) -> Any:
        model = params["model"]
        version = params.get("version", "")
        config = self._service.model_config(model, version)
        return decode_generate_request(model, version, request.body, config)

    def generate(self, request: HttpRequest, params: Params) -> HttpResponse | DeferredResponse:
        try:
            infer_request = self._decode(request, params)
            state = _Generate(infer_request.id)
            call = self._service.submit(infer_request, state.on_response)
        except TritiumError as exc:
            return from_error(exc)
        except Exception as exc:
            logger.error("unexpected error in generate", exc_info=exc)
            return error_response(500, "internal error in generate")
        state.call = call
        if isinstance(call, Completion):
            call.add_done_callback(state.on_done)
        state.answer.add_done_callback(state.abandoned)
        return DeferredResponse(state.answer, _answer)

    def generate_stream(self, request: HttpRequest, params: Params) -> HttpResponse | EventStream:
        events = EventStream()
        try:
            infer_request = self._decode(request, params)
            state = _GenerateStream(infer_request.id, events)
            call = self._service.submit(infer_request, state.on_response)
        except TritiumError as exc:
            return from_error(exc)
        except Exception as exc:
            logger.error("unexpected error in generate_stream", exc_info=exc)
            return error_response(500, "internal error in generate_stream")
        if isinstance(call, Completion):
            call.add_done_callback(state.on_done)
        events.on_cancel = call.cancel
        return events


def _answer(done: Completion) -> HttpResponse:
    exc = done.exception()
    if exc is not None:
        if isinstance(exc, TritiumError):
            return from_error(exc)
        logger.error("unexpected error in generate", exc_info=exc)
        return error_response(500, "internal error in generate")
    return done.result()
