"""The OpenAI frontend's sans-IO parts: request bodies, the text-model plan (tensors out,
counts back), chat templates, the answer documents, and a generation's stream of events
(incremental UTF-8, usage only when reported, errors after the stream started)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import pytest

from tritium.core import InferResponse, OutputTensor
from tritium.core.completion import Completion
from tritium.core.errors import InternalError, NotFound, Unavailable
from tritium.frontends.http.event_stream import EventStream
from tritium.frontends.openai.calls import CollectedGeneration, StreamedGeneration
from tritium.frontends.openai.chat_template import (
    ChatTemplate,
    load_chat_template,
    plain_prompt,
)
from tritium.frontends.openai.documents import DONE, Shape, usage_document
from tritium.frontends.openai.errors import OpenAIError, from_tritium
from tritium.frontends.openai.request_codec import decode_chat, decode_completion
from tritium.frontends.openai.text_model import TextModel


def _body(**fields: Any) -> bytes:
    return orjson.dumps(fields)


# ------------------------------------------------------------------------- request bodies


def test_a_completion_keeps_only_the_sampling_fields_given() -> None:
    request = decode_completion(
        _body(model="m", prompt=["hi"], max_tokens=5, temperature=0, stop="x", user="u")
    )
    assert (request.model, request.prompt, request.chat, request.stream) == (
        "m",
        "hi",
        False,
        False,
    )
    assert request.sampling == {"max_tokens": 5, "temperature": 0.0, "stop": ["x"]}


def test_chat_reads_text_parts_and_max_completion_tokens() -> None:
    request = decode_chat(
        _body(
            model="m",
            messages=[
                {"role": "system", "content": None},
                {
                    "role": "user",
                    "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}],
                },
            ],
            max_completion_tokens=9,
            stream=True,
            stream_options={"include_usage": True},
        )
    )
    assert request.messages == [
        {"role": "system", "content": ""},
        {"role": "user", "content": "ab"},
    ]
    assert request.max_tokens == 9 and request.stream and request.include_usage


@pytest.mark.parametrize(
    ("fields", "param"),
    [
        ({"prompt": "x"}, "model"),
        ({"model": "m"}, "prompt"),
        ({"model": "m", "prompt": "x", "max_tokens": True}, "max_tokens"),
        ({"model": "m", "prompt": "x", "max_tokens": 1.5}, "max_tokens"),
        ({"model": "m", "prompt": "x", "temperature": "hot"}, "temperature"),
        ({"model": "m", "prompt": "x", "seed": 1.5}, "seed"),
        ({"model": "m", "prompt": "x", "stop": ["a", 1]}, "stop"),
        ({"model": "m", "prompt": "x", "stop": ["a"] * 5}, "stop"),
        ({"model": "m", "prompt": "x", "stream": "yes"}, "stream"),
        ({"model": "m", "prompt": "x", "logprobs": 2}, "logprobs"),
        ({"model": "m", "prompt": "x", "echo": True}, "echo"),
        ({"model": "m", "prompt": "x", "best_of": 3}, "best_of"),
        ({"model": "m", "prompt": "x", "logit_bias": {"1": 2}}, "logit_bias"),
    ],
)
def test_bad_completion_fields_name_the_parameter(fields: dict[str, Any], param: str) -> None:
    with pytest.raises(OpenAIError) as caught:
        decode_completion(orjson.dumps(fields))
    assert caught.value.status == 400 and caught.value.param == param


@pytest.mark.parametrize(
    ("fields", "param"),
    [
        ({"model": "m", "messages": []}, "messages"),
        ({"model": "m", "messages": ["hi"]}, "messages.[0]"),
        ({"model": "m", "messages": [{"content": "hi"}]}, "messages.[0].role"),
        (
            {"model": "m", "messages": [{"role": "user", "content": [{"type": "image_url"}]}]},
            "messages.[0].content",
        ),
        ({"model": "m", "messages": [{"role": "user", "content": "x"}], "tools": [{}]}, "tools"),
        (
            {
                "model": "m",
                "messages": [{"role": "user", "content": "x"}],
                "response_format": {"type": "json_object"},
            },
            "response_format",
        ),
    ],
)
def test_bad_chat_fields_name_the_parameter(fields: dict[str, Any], param: str) -> None:
    with pytest.raises(OpenAIError) as caught:
        decode_chat(orjson.dumps(fields))
    assert caught.value.param == param


def test_a_body_that_is_not_a_json_object() -> None:
    for body in (b"", b"[1]", b"{"):
        with pytest.raises(OpenAIError) as caught:
            decode_completion(body)
        assert caught.value.status == 400


# ------------------------------------------------------------------------- errors


def test_core_errors_map_through_the_http_status_table() -> None:
    assert from_tritium(NotFound("gone"), "m").document()["error"]["code"] == "model_not_found"
    unavailable = from_tritium(Unavailable("busy"))
    assert (unavailable.status, unavailable.type) == (503, "service_unavailable_error")
    internal = from_tritium(InternalError("boom"))
    assert (internal.status, internal.type, internal.message) == (500, "server_error", "boom")


# ------------------------------------------------------------------------- text models


def _config(inputs: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    return {
        "max_batch_size": 0,
        "input": [{"name": "text_input", "data_type": "TYPE_STRING", "dims": [1]}, *inputs],
        "output": [{"name": "text_output", "data_type": "TYPE_STRING", "dims": [-1]}],
        **extra,
    }


def _inputs(model: TextModel, sampling: dict[str, Any], stream: bool = True) -> dict[str, Any]:
    request = model.request("hello", sampling, stream)
    return {t.name: (t.datatype, t.shape, t.data.reshape(-1).tolist()) for t in request.inputs}


def test_the_vllm_form_puts_sampling_in_one_json_input() -> None:
    flags = (
        "stream",
        "exclude_input_in_output",
        "return_num_input_tokens",
        "return_num_output_tokens",
    )
    config = _config(
        [{"name": n, "data_type": "TYPE_BOOL", "dims": [1], "optional": True} for n in flags]
        + [
            {
                "name": "sampling_parameters",
                "data_type": "TYPE_STRING",
                "dims": [1],
                "optional": True,
            }
        ]
    )
    model = TextModel("m", config)
    got = _inputs(model, {"max_tokens": 4, "stop": ["a"]}, stream=False)
    assert got["text_input"] == ("BYTES", (1,), [b"hello"])
    assert got["stream"] == ("BOOL", (1,), [False])
    assert all(got[n][2] == [True] for n in flags[1:])
    (raw,) = got["sampling_parameters"][2]
    assert json.loads(raw) == {"max_tokens": 4, "stop": ["a"]}
    assert "sampling_parameters" not in _inputs(model, {})
    # A stream that reports no usage does not ask for counts (two outputs per token).
    quiet = {t.name for t in model.request("hello", {}, True, counts=False).inputs}
    assert quiet == {"text_input", "stream", "exclude_input_in_output"}


def test_the_input_form_types_each_field_as_the_model_declares_it() -> None:
    config = _config(
        [
            {"name": "max_tokens", "data_type": "TYPE_INT32", "dims": [1]},
            {"name": "temperature", "data_type": "TYPE_FP32", "dims": [1], "optional": True},
            {"name": "stop_words", "data_type": "TYPE_STRING", "dims": [-1], "optional": True},
        ],
        max_batch_size=4,
    )
    model = TextModel("m", config)
    got = _inputs(model, {"temperature": 0.5, "stop": ["x", "y"], "top_p": 0.9})
    assert got["text_input"] == ("BYTES", (1, 1), [b"hello"])
    assert got["max_tokens"] == ("INT32", (1, 1), [16])  # required: OpenAI's default
    assert got["temperature"] == ("FP32", (1, 1), [0.5])
    assert got["stop_words"] == ("BYTES", (1, 2), [b"x", b"y"])
    # A field the model takes no input for becomes a request parameter.
    assert model.request("hello", {"top_p": 0.9}, True).parameters == {"top_p": 0.9}


def test_the_parameter_form_writes_lists_as_json_text() -> None:
    request = TextModel("m", _config([])).request("p", {"max_tokens": 2, "stop": ["a"]}, True)
    assert request.parameters == {"max_tokens": 2, "stop": '["a"]'}


@pytest.mark.parametrize(
    ("config", "why"),
    [
        ({"input": [], "output": []}, "text_input"),
        (
            _config([], output=[{"name": "text_output", "data_type": "TYPE_FP32", "dims": [1]}]),
            "text_output",
        ),
        (_config([{"name": "INPUT1", "data_type": "TYPE_FP32", "dims": [4]}]), "INPUT1"),
        (
            {
                "input": [{"name": "text_input", "data_type": "TYPE_STRING", "dims": [3]}],
                "output": [{"name": "text_output", "data_type": "TYPE_STRING", "dims": [1]}],
            },
            "text_input",
        ),
    ],
)
def test_models_that_are_not_text_generators(config: dict[str, Any], why: str) -> None:
    with pytest.raises(OpenAIError) as caught:
        TextModel("m", config)
    assert caught.value.status == 400 and caught.value.code == "model_not_supported"
    assert why in caught.value.message


def _response(text: bytes, counts: tuple[int, int] | None = None) -> InferResponse:
    outputs = [OutputTensor("text_output", "BYTES", (1,), np.array([text], dtype=np.object_))]
    if counts is not None:
        outputs.append(
            OutputTensor("num_input_tokens", "UINT32", (1,), np.array([counts[0]], np.uint32))
        )
        outputs.append(
            OutputTensor("num_output_tokens", "UINT32", (1,), np.array([counts[1]], np.uint32))
        )
    return InferResponse("m", "1", outputs=outputs)


def test_reading_a_response() -> None:
    piece = TextModel.read(_response(b"abc", (3, 1)))
    assert (piece.text, piece.input_tokens, piece.output_tokens) == (b"abc", 3, 1)
    assert TextModel.read(_response(b"x")).output_tokens is None


# ------------------------------------------------------------------------- chat templates


MESSAGES = [{"role": "system", "content": "s"}, {"role": "user", "content": "u"}]


def test_the_plain_template() -> None:
    assert plain_prompt(MESSAGES) == "system: s\nuser: u\nassistant:"


def test_a_template_renders_in_a_sandbox() -> None:
    template = ChatTemplate(
        "{{ bos_token }}{% for m in messages %}<{{ m.role }}>{{ m['content'] }}{% endfor %}"
        "{% if add_generation_prompt %}<assistant>{% endif %}",
        bos_token="<s>",
    )
    assert template.render(MESSAGES) == "<s><system>s<user>u<assistant>"
    unsafe = ChatTemplate("{{ messages.__class__.__mro__ }}")
    with pytest.raises(OpenAIError) as caught:
        unsafe.render(MESSAGES)
    assert caught.value.status == 400
    # Immutable: a template cannot change what it is given.
    with pytest.raises(OpenAIError):
        ChatTemplate("{{ messages.append(1) }}").render(MESSAGES)


def test_raise_exception_refuses_with_the_templates_text() -> None:
    template = ChatTemplate("{{ raise_exception('roles must alternate') }}")
    with pytest.raises(OpenAIError) as caught:
        template.render(MESSAGES)
    assert caught.value.message == "roles must alternate" and caught.value.param == "messages"


def test_templates_are_found_next_to_the_model(tmp_path: Path) -> None:
    (tmp_path / "a" / "1").mkdir(parents=True)
    (tmp_path / "a" / "1" / "tokenizer_config.json").write_text(
        json.dumps({"chat_template": "v1:{{ messages[0].content }}"})
    )
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "chat_template.jinja").write_text("jinja:{{ messages|length }}")
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "tokenizer_config.json").write_text(json.dumps({"eos_token": "</s>"}))
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "tokenizer_config.json").write_text("{broken")
    found_a = load_chat_template([tmp_path], "a")
    found_b = load_chat_template([tmp_path], "b")
    assert found_a is not None and found_a.render(MESSAGES) == "v1:s"
    assert found_b is not None and found_b.render(MESSAGES) == "jinja:2"
    assert load_chat_template([tmp_path], "c") is None
    assert load_chat_template([tmp_path], "d") is None  # logged, plain template used
    assert load_chat_template([tmp_path], "missing") is None
    (tmp_path / "e").mkdir()
    (tmp_path / "e" / "chat_template.jinja").write_text("{% for %}")
    assert load_chat_template([tmp_path], "e") is None  # does not compile: logged, plain


# ------------------------------------------------------------------------- documents


def test_stream_chunks_are_json_events() -> None:
    shape = Shape(True, "m")
    event = shape.text_event('say "hi"\n')
    assert event.startswith(b"data: ") and event.endswith(b"\n\n")
    doc = json.loads(event[6:])
    assert doc["choices"][0]["delta"] == {"content": 'say "hi"\n'}
    assert (doc["id"], doc["object"], doc["model"]) == (shape.id, "chat.completion.chunk", "m")
    usage = json.loads(shape.usage_event({"prompt_tokens": 1})[6:])
    assert usage["choices"] == [] and usage["usage"] == {"prompt_tokens": 1}
    whole = json.loads(Shape(False, "m").whole("t", "stop", None))
    assert "usage" not in whole and whole["choices"][0]["text"] == "t"


def test_usage_is_never_invented() -> None:
    assert usage_document(None, 3) is None
    assert usage_document(2, None) is None
    assert usage_document(2, 3) == {"prompt_tokens": 2, "completion_tokens": 3, "total_tokens": 5}


# ------------------------------------------------------------------------- generations


def _payloads(events: EventStream) -> list[bytes]:
    sent: list[bytes] = []
    events.attach(lambda data: sent.append(data) or True, lambda: None)
    return sent


def test_a_stream_decodes_characters_split_across_responses() -> None:
    events = EventStream()
    sent = _payloads(events)
    generation = StreamedGeneration(events, Shape(False, "m"), max_tokens=2, include_usage=True)
    snow = "☃".encode()
    generation.on_response(None, _response(b"a" + snow[:1], (4, 1)), False)
    generation.on_response(None, _response(snow[1:], (4, 1)), False)
    generation.on_response(None, None, True)
    docs = [json.loads(s[6:]) for s in sent[:-1]]
    assert [d["choices"][0]["text"] for d in docs[:2]] == ["a", "☃"]
    assert docs[2]["choices"][0]["finish_reason"] == "length"
    assert docs[3]["usage"] == {"prompt_tokens": 4, "completion_tokens": 2, "total_tokens": 6}
    assert sent[-1] == DONE and events.ended


def test_an_error_after_the_stream_started_is_an_event_then_done() -> None:
    events = EventStream()
    sent = _payloads(events)
    generation = StreamedGeneration(events, Shape(True, "m"), None, include_usage=True)
    failed = InferResponse("m", "1")
    failed.error = InternalError("model failed")
    generation.on_response(None, _response(b"x"), False)
    generation.on_response(None, failed, False)
    generation.on_response(None, _response(b"ignored"), False)
    generation.on_response(None, None, True)
    assert json.loads(sent[0][6:])["choices"][0]["delta"]["role"] == "assistant"
    assert json.loads(sent[2][6:]) == {
        "error": {
            "message": "model failed",
            "type": "server_error",
            "param": None,
            "code": "internal",
        }
    }
    assert sent[3:] == [DONE]


def test_a_collected_generation_joins_the_responses() -> None:
    generation = CollectedGeneration(Shape(False, "m"), max_tokens=8)
    generation.on_response(None, _response(b"ab", (2, 1)), False)
    generation.on_response(None, _response(b"c", (2, 1)), True)
    answer = generation.answer.result()
    doc = json.loads(answer.body)  # type: ignore[arg-type]
    assert doc["choices"][0]["text"] == "abc"
    assert doc["choices"][0]["finish_reason"] == "stop"  # 2 of 8 tokens
    assert doc["usage"]["completion_tokens"] == 2


def test_a_collected_generation_of_a_model_that_answers_once() -> None:
    generation = CollectedGeneration(Shape(True, "m"), None)
    done: Completion[InferResponse] = Completion()
    done.add_done_callback(generation.on_done)
    done.set_exception(Unavailable("unloading"))
    answer = generation.answer.result()
    assert answer.status == 503


def test_abandoning_a_collected_answer_cancels_the_call() -> None:
    class Call:
        cancelled = False

        def cancel(self) -> None:
            self.cancelled = True

    generation = CollectedGeneration(Shape(False, "m"), None)
    generation.call = call = Call()
    generation.answer.add_done_callback(generation.abandoned)
    generation.answer.cancel()
    assert call.cancelled
