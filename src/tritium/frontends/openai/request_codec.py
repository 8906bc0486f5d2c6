"""The bodies of ``POST /v1/completions`` and ``/v1/chat/completions``, read and checked
without I/O: JSON bytes in, a :class:`GenerationRequest` out, or an OpenAI 400 naming
the field.

Sampling fields the client gives (and only those) are kept under their OpenAI names in
``sampling``; how they reach the model is the model plan's business (``text_model``).
Fields OpenAI defines that a text generator here cannot honour (``n`` > 1, ``logprobs``,
``echo``, ``suffix``, tools, non-text response formats, token-id prompts) are refused
with a 400 rather than ignored; fields OpenAI does not define are ignored, as vLLM's
server ignores them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import orjson

from tritium.frontends.openai.errors import OpenAIError, bad_parameter

#: Sampling fields passed on to the model: name -> (kind, minimum, maximum).
_NUMBERS: dict[str, tuple[type, float | None, float | None]] = {
    "temperature": (float, 0.0, 2.0),
    "top_p": (float, 0.0, 1.0),
    "presence_penalty": (float, -2.0, 2.0),
    "frequency_penalty": (float, -2.0, 2.0),
    "seed": (int, None, None),
    "top_k": (int, -1, None),
}
_MAX_STOPS = 4


@dataclass(slots=True)
class GenerationRequest:
    """One completion or chat completion request, checked."""

    model: str
    chat: bool
    prompt: str = ""
    messages: list[dict[str, str]] = field(default_factory=list)
    stream: bool = False
    #: ``stream_options.include_usage``: a last chunk with ``usage`` before ``[DONE]``.
    include_usage: bool = False
    sampling: dict[str, Any] = field(default_factory=dict)

    @property
    def max_tokens(self) -> int | None:
        return self.sampling.get("max_tokens")


def _load(body: bytes) -> dict[str, Any]:
    try:
        doc = orjson.loads(body) if body else None
    except orjson.JSONDecodeError as exc:
        raise OpenAIError(400, f"The request body is not valid JSON: {exc}") from None
    if type(doc) is not dict:
        raise OpenAIError(400, "The request body must be a JSON object.")
    return doc


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _integer(doc: dict[str, Any], name: str, minimum: int) -> int | None:
    value = doc.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise bad_parameter(name, f"'{name}' must be an integer, got {value!r}.")
    if value < minimum:
        raise bad_parameter(name, f"'{name}' must be at least {minimum}, got {value}.")
    return value


def _sampling(doc: dict[str, Any], max_tokens_names: tuple[str, ...]) -> dict[str, Any]:
    sampling: dict[str, Any] = {}
    for name in max_tokens_names:
        value = _integer(doc, name, 1)
        if value is not None:
            sampling["max_tokens"] = value
    for name, (kind, low, high) in _NUMBERS.items():
        value = doc.get(name)
        if value is None:
            continue
        if not _is_number(value) or (kind is int and not isinstance(value, int)):
            what = "an integer" if kind is int else "a number"
            raise bad_parameter(name, f"'{name}' must be {what}, got {value!r}.")
        if (low is not None and value < low) or (high is not None and value > high):
            bounds = f"between {low} and {high}" if high is not None else f"at least {low}"
            raise bad_parameter(name, f"'{name}' must be {bounds}, got {value}.")
        sampling[name] = kind(value)
    stop = doc.get("stop")
    if stop is not None:
        stops = [stop] if isinstance(stop, str) else stop
        if type(stops) is not list or not all(isinstance(s, str) for s in stops):
            raise bad_parameter("stop", "'stop' must be a string or a list of strings.")
        if len(stops) > _MAX_STOPS:
            raise bad_parameter("stop", f"'stop' takes at most {_MAX_STOPS} sequences.")
        if stops:
            sampling["stop"] = stops
    return sampling


def _refuse_unsupported(doc: dict[str, Any], chat: bool) -> None:
    n = doc.get("n")
    if n is not None and n != 1:
        raise bad_parameter("n", "Only n=1 is supported: one choice per request.")
    if doc.get("logprobs") or doc.get("top_logprobs"):
        raise bad_parameter("logprobs", "logprobs are not supported by this server.")
    logit_bias = doc.get("logit_bias")
    if logit_bias:
        raise bad_parameter("logit_bias", "logit_bias is not supported by this server.")
    if chat:
        for name in ("tools", "functions", "tool_choice", "function_call"):
            if doc.get(name) not in (None, [], "none"):
                raise bad_parameter(name, f"'{name}' is not supported by this server.")
        response_format = doc.get("response_format")
        if response_format is not None and response_format != {"type": "text"}:
            raise bad_parameter("response_format", "Only the 'text' response format is supported.")
    else:
        if doc.get("echo"):
            raise bad_parameter("echo", "echo is not supported by this server.")
        if doc.get("suffix"):
            raise bad_parameter("suffix", "suffix is not supported by this server.")
        best_of = doc.get("best_of")
        if best_of is not None and best_of != 1:
            raise bad_parameter("best_of", "Only best_of=1 is supported.")


def _common(doc: dict[str, Any], chat: bool) -> GenerationRequest:
    model = doc.get("model")
    if not isinstance(model, str) or not model:
        raise OpenAIError(400, "'model' is required: the name of a model.", param="model")
    stream = doc.get("stream", False)
    if stream is None:
        stream = False
    if type(stream) is not bool:
        raise bad_parameter("stream", f"'stream' must be a boolean, got {stream!r}.")
    include_usage = False
    options = doc.get("stream_options")
    if options is not None:
        if not stream:
            raise bad_parameter(
                "stream_options",
                "The 'stream_options' parameter is only allowed when 'stream' is enabled.",
            )
        if type(options) is not dict:
            raise bad_parameter("stream_options", "'stream_options' must be an object.")
        usage = options.get("include_usage", False)
        if type(usage) is not bool:
            raise bad_parameter(
                "stream_options", "'stream_options.include_usage' must be a boolean."
            )
        include_usage = usage
    _refuse_unsupported(doc, chat)
    names = ("max_tokens", "max_completion_tokens") if chat else ("max_tokens",)
    return GenerationRequest(
        model, chat, stream=stream, include_usage=include_usage, sampling=_sampling(doc, names)
    )


def decode_completion(body: bytes) -> GenerationRequest:
    """A ``/v1/completions`` body: ``prompt`` is a string (or a list of one string)."""
    doc = _load(body)
    request = _common(doc, chat=False)
    prompt = doc.get("prompt")
    if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], str):
        prompt = prompt[0]
    if not isinstance(prompt, str):
        raise bad_parameter(
            "prompt",
            "'prompt' must be a string (token ids and batches of prompts are not supported).",
        )
    request.prompt = prompt
    return request


def _content(index: int, content: Any) -> str:
    if content is None or isinstance(content, str):
        return content or ""
    if type(content) is list:
        texts = []
        for part in content:
            if type(part) is not dict or part.get("type") != "text":
                raise bad_parameter(
                    f"messages.[{index}].content", "Only text content parts are supported."
                )
            text = part.get("text")
            if not isinstance(text, str):
                raise bad_parameter(f"messages.[{index}].content", "A text part needs 'text'.")
            texts.append(text)
        return "".join(texts)
    raise bad_parameter(
        f"messages.[{index}].content", "'content' must be a string or a list of text parts."
    )


def decode_chat(body: bytes) -> GenerationRequest:
    """A ``/v1/chat/completions`` body: ``messages`` of ``{"role", "content"}``."""
    doc = _load(body)
    request = _common(doc, chat=True)
    messages = doc.get("messages")
    if type(messages) is not list or not messages:
        raise bad_parameter("messages", "'messages' must be a non-empty list of messages.")
    checked = []
    for index, message in enumerate(messages):
        if type(message) is not dict:
            raise bad_parameter(f"messages.[{index}]", "Each message must be an object.")
        role = message.get("role")
        if not isinstance(role, str) or not role:
            raise bad_parameter(f"messages.[{index}].role", "Each message needs a 'role'.")
        entry = {"role": role, "content": _content(index, message.get("content"))}
        name = message.get("name")
        if isinstance(name, str):
            entry["name"] = name
        checked.append(entry)
    request.messages = checked
    return request
