"""The OpenAI routes: ``GET /v1/models``, ``GET /v1/models/{model}``,
``POST /v1/completions`` and ``POST /v1/chat/completions``.

Handlers decode (``request_codec``), plan the model's tensors (``text_model``), submit
through the service exactly as the generate extension does (``submit(request, stream)``:
a decoupled call or a completion), and answer through ``calls``: an :class:`EventStream`
when the client streams, else a deferred response. Closing the stream cancels the
request in the model (the stream's ``on_cancel`` cancels the call), and so does going
away before a whole answer. Model plans are kept per loaded configuration (a reload
gives a new one), chat templates likewise; a template not read yet is read off the loop
while that first request waits in a task.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any, Protocol

import orjson

from tritium.core.completion import Completion
from tritium.core.errors import TritiumError
from tritium.core.types import InferRequest, InferResponse
from tritium.frontends.http.event_stream import EventStream
from tritium.frontends.http.messages import (
    CONTENT_JSON,
    DeferredResponse,
    HttpRequest,
    HttpResponse,
)
from tritium.frontends.http.router import Params, Router
from tritium.frontends.openai.calls import (
    CollectedGeneration,
    StreamedGeneration,
    collected_answer,
)
from tritium.frontends.openai.chat_template import ChatTemplate, load_chat_template, plain_prompt
from tritium.frontends.openai.documents import Shape, model_document
from tritium.frontends.openai.errors import (
    OpenAIError,
    from_tritium,
    internal_error,
)
from tritium.frontends.openai.request_codec import (
    GenerationRequest,
    decode_chat,
    decode_completion,
)
from tritium.frontends.openai.text_model import TextModel

log = logging.getLogger("tritium.frontends.openai")

Answer = HttpResponse | DeferredResponse | EventStream
_NO_TEMPLATE = object()  # looked for, none found


class GenerationService(Protocol):
    """All this frontend asks of the service: what the generate extension asks, and the
    repository index for ``/v1/models``."""

    def model_config(self, name: str, version: str) -> dict[str, Any]: ...

    def submit(
        self, request: InferRequest, stream: Callable[[Any, InferResponse | None, bool], None]
    ) -> Any:
        """A decoupled call, or the completion of a model that answers once."""
        ...

    async def repository_index(self, ready_only: bool = False) -> list[dict[str, Any]]: ...


class _Plan:
    """What is known of one loaded configuration of a model."""

    __slots__ = ("config", "text", "refusal", "template")

    def __init__(self, name: str, config: dict[str, Any]) -> None:
        self.config = config
        self.text: TextModel | None = None
        self.refusal: OpenAIError | None = None
        try:
            self.text = TextModel(name, config)
        except OpenAIError as exc:
            self.refusal = exc
        #: None until looked for; then a ChatTemplate or _NO_TEMPLATE.
        self.template: object = None


class OpenAIRoutes:
    def __init__(
        self,
        service: GenerationService,
        repositories: Sequence[Path],
        *,
        created: int,
        owner: str = "tritium",
    ) -> None:
        self._service = service
        self._repositories = tuple(Path(p) for p in repositories)
        self._created = created
        self._owner = owner
        self._plans: dict[str, _Plan] = {}

    def register(self, router: Router) -> None:
        router.add("GET", "/v1/models", self.list_models)
        router.add("GET", "/v1/models/{model}", self.get_model)
        router.add("POST", "/v1/completions", self.completions)
        router.add("POST", "/v1/chat/completions", self.chat_completions)

    # ---------------------------------------------------------------- models

    def _plan(self, name: str) -> _Plan:
        """The plan of the model's default version; raises an OpenAI error."""
        try:
            config = self._service.model_config(name, "")
        except TritiumError as exc:
            raise from_tritium(exc, name) from None
        plan = self._plans.get(name)
        if plan is None or plan.config is not config:
            plan = self._plans[name] = _Plan(name, config)
        return plan

    def _text_model(self, name: str) -> tuple[_Plan, TextModel]:
        plan = self._plan(name)
        if plan.text is None:
            assert plan.refusal is not None
            raise plan.refusal
        return plan, plan.text

    async def list_models(self, request: HttpRequest, params: Params) -> HttpResponse:
        """The ready models that are text generators, under their repository names."""
        index = await self._service.repository_index(True)
        names = sorted({entry["name"] for entry in index})
        data = []
        for name in names:
            try:
                self._text_model(name)
            except OpenAIError:
                continue
            data.append(model_document(name, self._created, self._owner))
        return HttpResponse(200, orjson.dumps({"object": "list", "data": data}), CONTENT_JSON)

    def get_model(self, request: HttpRequest, params: Params) -> HttpResponse:
        name = params["model"]
        try:
            self._text_model(name)
        except OpenAIError as exc:
            if exc.status != 404:
                exc = OpenAIError(
                    404, exc.message, type="not_found_error", param="model", code=exc.code
                )
            return exc.response()
        return HttpResponse(
            200, orjson.dumps(model_document(name, self._created, self._owner)), CONTENT_JSON
        )

    # ---------------------------------------------------------------- generation

    def completions(self, request: HttpRequest, params: Params) -> Answer:
        try:
            generation = decode_completion(request.body)
            _, model = self._text_model(generation.model)
            return self._start(model, generation, generation.prompt)
        except OpenAIError as exc:
            return exc.response()

    def chat_completions(
        self, request: HttpRequest, params: Params
    ) -> Answer | Awaitable[HttpResponse | EventStream]:
        try:
            generation = decode_chat(request.body)
            plan, model = self._text_model(generation.model)
            if plan.template is None:
                return self._chat_after_lookup(plan, model, generation)
            return self._start(model, generation, _render(plan.template, generation))
        except OpenAIError as exc:
            return exc.response()

    async def _chat_after_lookup(
        self, plan: _Plan, model: TextModel, generation: GenerationRequest
    ) -> HttpResponse | EventStream:
        """The first chat request of a loaded configuration: find its template off the
        event loop, then go on as every later request does."""
        loop = asyncio.get_running_loop()
        try:
            found = await loop.run_in_executor(
                None, load_chat_template, self._repositories, model.name
            )
            plan.template = found if found is not None else _NO_TEMPLATE
            answer = self._start(model, generation, _render(plan.template, generation))
        except OpenAIError as exc:
            return exc.response()
        if isinstance(answer, DeferredResponse):
            # A collected answer never fails; cancelling this task (the client went
            # away) cancels it, and so the request.
            return await answer.future
        return answer

    def _start(self, model: TextModel, generation: GenerationRequest, prompt: str) -> Answer:
        # Counts cost the model two more outputs per response: asked for only when the
        # answer reports usage.
        counts = not generation.stream or generation.include_usage
        request = model.request(prompt, generation.sampling, generation.stream, counts)
        shape = Shape(generation.chat, model.name)
        max_tokens = generation.max_tokens
        if generation.stream:
            events = EventStream()
            streamed = StreamedGeneration(events, shape, max_tokens, generation.include_usage)
            call = self._submit(request, streamed.on_response)
            if isinstance(call, Completion):
                call.add_done_callback(streamed.on_done)
            events.on_cancel = call.cancel
            return events
        collected = CollectedGeneration(shape, max_tokens)
        call = self._submit(request, collected.on_response)
        collected.call = call
        if isinstance(call, Completion):
            call.add_done_callback(collected.on_done)
        collected.answer.add_done_callback(collected.abandoned)
        return DeferredResponse(collected.answer, collected_answer)

    def _submit(
        self, request: InferRequest, emit: Callable[[Any, InferResponse | None, bool], None]
    ) -> Any:
        try:
            return self._service.submit(request, emit)
        except TritiumError as exc:
            raise from_tritium(exc) from None
        except Exception as exc:
            log.error("unexpected error submitting an OpenAI request", exc_info=exc)
            raise internal_error("the generation") from None


def _render(template: object, generation: GenerationRequest) -> str:
    if isinstance(template, ChatTemplate):
        return template.render(generation.messages)
    return plain_prompt(generation.messages)
