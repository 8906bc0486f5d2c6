"""The OpenAI endpoint with the official ``openai`` client, sync and async: completions and
chat completions, streamed and not; the three forms sampling fields reach a model in;
chat templates; usage only when the model reports counts; OpenAI-shaped errors; and a
closed stream cancelling the request in the model."""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import sys
from collections.abc import Iterator

import openai
import pytest

from tritium.testing import ServerProcess

from .openai_server import ROOT, openai_server, wait_for_note


@pytest.fixture(scope="module")
def server() -> Iterator[ServerProcess]:
    with openai_server() as process:
        yield process


@pytest.fixture(scope="module")
def client(server: ServerProcess) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(base_url=server.openai_url, api_key="unused", max_retries=0) as c:
        yield c


# ------------------------------------------------------------------------- models


def test_models_lists_the_text_generators(client: openai.OpenAI) -> None:
    ids = sorted(model.id for model in client.models.list())
    assert ids == ["text_echo", "text_flood", "tiny_lm", "word_stream"]  # not add_sub
    assert client.models.retrieve("tiny_lm").owned_by == "tritium"


def test_retrieving_a_model_that_is_no_text_generator_is_not_found(client: openai.OpenAI) -> None:
    with pytest.raises(openai.NotFoundError):
        client.models.retrieve("add_sub")


# ------------------------------------------------------------------------- completions


def test_completion(client: openai.OpenAI) -> None:
    reply = client.completions.create(model="tiny_lm", prompt="the server", max_tokens=5)
    assert reply.object == "text_completion" and reply.model == "tiny_lm"
    assert reply.id.startswith("cmpl-")
    (choice,) = reply.choices
    assert choice.text == " reads the server reads the"
    assert choice.finish_reason == "length"
    assert reply.usage is not None
    assert (reply.usage.prompt_tokens, reply.usage.completion_tokens) == (2, 5)
    assert reply.usage.total_tokens == 7


def test_streamed_completion_matches_the_whole_one(client: openai.OpenAI) -> None:
    whole = client.completions.create(model="tiny_lm", prompt="the client", max_tokens=6)
    chunks = list(
        client.completions.create(
            model="tiny_lm",
            prompt="the client",
            max_tokens=6,
            stream=True,
            stream_options={"include_usage": True},
        )
    )
    texts = [c.choices[0].text for c in chunks if c.choices]
    assert len(texts) == 7  # one chunk per token, then the finish chunk
    assert "".join(texts) == whole.choices[0].text
    assert chunks[-2].choices[0].finish_reason == "length"
    assert chunks[-1].choices == [] and chunks[-1].usage is not None
    assert chunks[-1].usage.completion_tokens == 6
    assert len({c.id for c in chunks}) == 1


def test_stop_sequences_reach_the_model_in_its_sampling_json(client: openai.OpenAI) -> None:
    reply = client.completions.create(
        model="tiny_lm", prompt="the server", max_tokens=20, stop=["server"]
    )
    assert reply.choices[0].text == " reads the "
    assert reply.choices[0].finish_reason == "stop"


def test_sampling_fields_as_typed_inputs(client: openai.OpenAI) -> None:
    reply = client.completions.create(
        model="text_echo", prompt="hi", max_tokens=7, temperature=0.5, seed=3, stop=["a", "b"]
    )
    seen = json.loads(reply.choices[0].text)
    assert seen["prompt"] == "hi"
    assert seen["max_tokens"] == {"shape": [1, 1], "values": [7]}
    assert seen["temperature"] == {"shape": [1, 1], "values": [0.5]}
    assert seen["random_seed"] == {"shape": [1, 1], "values": [3]}
    assert seen["stop_words"] == {"shape": [1, 2], "values": ["a", "b"]}
    assert seen["parameters"] == {}
    assert reply.usage is None  # the model reports no token counts: none are invented


def test_a_required_max_tokens_input_gets_openais_default(client: openai.OpenAI) -> None:
    seen = json.loads(client.completions.create(model="text_echo", prompt="x").choices[0].text)
    assert seen["max_tokens"]["values"] == [16]
    assert "temperature" not in seen


def test_sampling_fields_as_request_parameters(client: openai.OpenAI) -> None:
    reply = client.completions.create(model="word_stream", prompt="hello", max_tokens=3)
    assert reply.choices[0].text == "You said: hello. Thank you"
    # No counts reported: each response with text counts as a token for finish_reason.
    assert reply.choices[0].finish_reason == "length"
    assert reply.usage is None
    reply = client.completions.create(model="word_stream", prompt="hello", max_tokens=100)
    assert reply.choices[0].finish_reason == "stop"


# ------------------------------------------------------------------------- chat


def test_chat_with_the_models_template(client: openai.OpenAI) -> None:
    reply = client.chat.completions.create(
        model="text_echo",
        messages=[
            {"role": "system", "content": "be brief"},
            {"role": "user", "content": [{"type": "text", "text": "hi"}]},
        ],
    )
    assert reply.object == "chat.completion" and reply.id.startswith("chatcmpl-")
    message = reply.choices[0].message
    assert message.role == "assistant"
    # tokenizer_config.json's "default" template, with its bos token given as an object
    assert json.loads(message.content or "")["prompt"] == (
        "<s>[system] be brief</s>[user] hi</s>[assistant]"
    )


def test_a_template_can_refuse_a_conversation(client: openai.OpenAI) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        client.chat.completions.create(
            model="text_echo", messages=[{"role": "user", "content": "refuse me"}]
        )
    assert "refused by the template" in caught.value.message
    assert caught.value.param == "messages"


def test_chat_without_a_template_uses_the_plain_one(client: openai.OpenAI) -> None:
    reply = client.chat.completions.create(
        model="word_stream",
        messages=[{"role": "system", "content": "be kind"}, {"role": "user", "content": "hi"}],
        max_tokens=1,
    )
    assert reply.choices[0].message.content == "You said: system: be kind\nuser: hi\nassistant:."


def test_streamed_chat(client: openai.OpenAI) -> None:
    messages = [{"role": "user", "content": "hello the model"}]
    whole = client.chat.completions.create(model="tiny_lm", messages=messages, max_tokens=4)
    assert whole.usage is not None and whole.usage.prompt_tokens == 5
    chunks = list(
        client.chat.completions.create(
            model="tiny_lm", messages=messages, max_tokens=4, stream=True
        )
    )
    assert chunks[0].choices[0].delta.role == "assistant"
    assert chunks[-1].choices[0].finish_reason == "length"
    text = "".join(c.choices[0].delta.content or "" for c in chunks)
    assert text == whole.choices[0].message.content
    assert all(c.usage is None for c in chunks)  # not asked for


def test_async_client_streams_concurrently(server: ServerProcess) -> None:
    async def run() -> list[str]:
        async with openai.AsyncOpenAI(base_url=server.openai_url, api_key="x") as client:

            async def one(prompt: str) -> str:
                stream = await client.completions.create(
                    model="tiny_lm", prompt=prompt, max_tokens=5, stream=True
                )
                return "".join([c.choices[0].text async for c in stream])

            prompts = ["the server", "the client", "the model", "the answer"]
            texts = await asyncio.gather(*(one(p) for p in prompts))
            chat = await client.chat.completions.create(
                model="tiny_lm", messages=[{"role": "user", "content": "hi"}], max_tokens=3
            )
            return [*texts, chat.choices[0].message.content or ""]

    texts = asyncio.run(asyncio.wait_for(run(), 60))
    assert texts[0] == " reads the server reads the"
    assert texts[3] == " one word at a time"
    assert all(len(t.split()) == 5 for t in texts[:4])
    assert len(texts[4].split()) == 3


# ------------------------------------------------------------------------- errors


def test_unknown_model(client: openai.OpenAI) -> None:
    with pytest.raises(openai.NotFoundError) as caught:
        client.completions.create(model="no_such_model", prompt="x")
    error = caught.value
    assert error.status_code == 404
    assert (error.code, error.param, error.type) == ("model_not_found", "model", "not_found_error")
    assert "no_such_model" in error.message


def test_a_model_that_is_not_a_text_generator(client: openai.OpenAI) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        client.chat.completions.create(model="add_sub", messages=[{"role": "user", "content": "x"}])
    assert caught.value.code == "model_not_supported"
    assert "text_input" in caught.value.message


@pytest.mark.parametrize(
    ("field", "value"),
    [("temperature", 2.5), ("top_p", -0.1), ("max_tokens", 0), ("n", 2), ("presence_penalty", 3)],
)
def test_bad_parameters(client: openai.OpenAI, field: str, value: float) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        client.completions.create(model="tiny_lm", prompt="x", **{field: value})  # type: ignore[call-overload]
    assert caught.value.status_code == 400
    assert caught.value.param == field
    assert caught.value.type == "invalid_request_error"


def test_async_errors_are_raised_too(server: ServerProcess) -> None:
    async def run() -> None:
        async with openai.AsyncOpenAI(
            base_url=server.openai_url, api_key="x", max_retries=0
        ) as client:
            with pytest.raises(openai.NotFoundError):
                await client.chat.completions.create(
                    model="missing", messages=[{"role": "user", "content": "x"}], stream=True
                )

    asyncio.run(asyncio.wait_for(run(), 30))


# ------------------------------------------------------------------------- cancellation


def test_closing_a_stream_cancels_the_request_in_the_model(
    server: ServerProcess, client: openai.OpenAI
) -> None:
    note = "tiny_lm: cancelled after"
    before = server.log.count(note)
    stream = client.completions.create(
        model="tiny_lm", prompt="the server", max_tokens=2000, stream=True
    )
    for i, _ in enumerate(stream):
        if i == 2:
            break
    stream.close()
    assert wait_for_note(server, note, before) < 100  # of 2000, 20 ms apart


def test_an_async_client_that_goes_away_cancels_the_request(server: ServerProcess) -> None:
    note = "tiny_lm: cancelled after"
    before = server.log.count(note)

    async def run() -> None:
        async with openai.AsyncOpenAI(base_url=server.openai_url, api_key="x") as client:
            stream = await client.chat.completions.create(
                model="tiny_lm",
                messages=[{"role": "user", "content": "go on"}],
                max_tokens=2000,
                stream=True,
            )
            async for chunk in stream:
                if chunk.choices and chunk.choices[0].delta.content:
                    break
            await stream.close()

    asyncio.run(asyncio.wait_for(run(), 30))
    assert wait_for_note(server, note, before) < 100


# ------------------------------------------------------------------------- docs


def test_the_docs_snippet_runs_as_printed(server: ServerProcess) -> None:
    page = (ROOT / "docs" / "openai.md").read_text()
    snippet = re.findall(r"```python\n(.*?)```", page, re.S)[0]
    assert "http://localhost:9000/v1" in snippet
    code = snippet.replace("http://localhost:9000/v1", server.openai_url)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0].startswith(" reads the server reads the CompletionUsage(")
    assert len(lines[1].split()) == 8  # the streamed reply, word by word
    assert "completion_tokens=8" in lines[2]
