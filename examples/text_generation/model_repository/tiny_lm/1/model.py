"""tiny_lm: a weightless text generator with the interface of Triton's vLLM model.

It "tokenizes" on white space and continues the prompt with a word chain built from a
short text below: greedy (temperature 0, the default) or sampled with ``seed``. Each
token is sent as its own response after ``token_delay_ms`` (the model parameter, or the
sampling parameter ``delay_ms``), the way a language model streams while it computes.

Inputs and outputs follow the vLLM model of Triton's vllm_backend, so the same clients
work with both: ``text_input``; optional ``stream`` (false: one response with the whole
text), ``sampling_parameters`` (a JSON object: ``max_tokens``, ``temperature``,
``seed``, ``stop``), ``exclude_input_in_output``, ``return_num_input_tokens`` and
``return_num_output_tokens``; outputs ``text_output`` and the token counts (the output
count of each response is the tokens in that response). Requests run concurrently
(``async def execute``); a cancelled request stops generating at the next token.

The file runs unchanged on Triton's Python backend and on tritium.
"""

import asyncio
import json
import random

import numpy as np
import triton_python_backend_utils as pb_utils

TEXT = (
    "the server reads the request and the model writes the answer one word at a time "
    "while the client reads each word as soon as the server sends it and the answer "
    "grows until the model stops or the client has read enough words for the question "
    "so the time to the first word and the time between words are what the client feels"
)


def _chain(text):
    words = text.split()
    follow = {}
    for word, after in zip(words, words[1:] + words[:1]):
        follow.setdefault(word, []).append(after)
    return words, follow


WORDS, FOLLOW = _chain(TEXT)


def _bool_input(request, name, default):
    tensor = pb_utils.get_input_tensor_by_name(request, name)
    if tensor is None:
        return default
    return bool(tensor.as_numpy().reshape(-1)[0])


def _uint32(name, value):
    return pb_utils.Tensor(name, np.array([value], dtype=np.uint32))


class TritonPythonModel:
    def initialize(self, args):
        config = json.loads(args["model_config"])
        parameter = config.get("parameters", {}).get("token_delay_ms", {})
        self.delay_ms = float(parameter.get("string_value", "20"))

    async def execute(self, requests):
        # Decoupled: every request answers through its own response sender.
        await asyncio.gather(*(self._generate(request) for request in requests))
        return None

    async def _generate(self, request):
        sender = request.get_response_sender()
        try:
            await self._run(request, sender)
        except ValueError as exc:
            sender.send(
                pb_utils.InferenceResponse(error=pb_utils.TritonError(str(exc))),
                flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL,
            )

    async def _run(self, request, sender):
        raw = pb_utils.get_input_tensor_by_name(request, "text_input").as_numpy().reshape(-1)[0]
        prompt = raw.decode("utf-8", errors="replace") if isinstance(raw, bytes) else str(raw)
        stream = _bool_input(request, "stream", True)
        exclude = _bool_input(request, "exclude_input_in_output", False)
        counts_in = _bool_input(request, "return_num_input_tokens", False)
        counts_out = _bool_input(request, "return_num_output_tokens", False)
        params = self._sampling(request)
        max_tokens = params["max_tokens"]
        delay = params["delay_ms"] / 1000.0
        stops = params["stop"]
        rng = random.Random(params["seed"]) if params["temperature"] > 0 else None

        prompt_words = prompt.split()
        word = prompt_words[-1].lower() if prompt_words else ""
        if word not in FOLLOW:
            word = WORDS[sum(prompt.encode()) % len(WORDS)]
        text = ""
        tokens = 0
        while tokens < max_tokens:
            await asyncio.sleep(delay)
            if sender.is_cancelled():
                # The client went away: stop computing what nobody will read.
                print(f"tiny_lm: cancelled after {tokens} tokens", flush=True)
                sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
                return
            followers = FOLLOW[word]
            word = rng.choice(followers) if rng is not None else followers[0]
            # Continue the prompt: a space before each word but a first one that follows
            # an empty prompt or one that ends in white space.
            starts = not text and (not prompt or prompt[-1].isspace())
            piece = word if starts else " " + word
            stopped = False
            if stops:
                cut = _first_stop(text + piece, stops)
                if cut is not None:
                    piece = (text + piece)[:cut][len(text) :]
                    stopped = True
            if piece:
                text += piece
                tokens += 1
                if stream:
                    sender.send(self._response(piece, len(prompt_words), 1, counts_in, counts_out))
            if stopped:
                break
        if stream:
            sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
            return
        whole = text if exclude else prompt + text
        sender.send(
            self._response(whole, len(prompt_words), tokens, counts_in, counts_out),
            flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL,
        )

    def _sampling(self, request):
        text = "{}"
        tensor = pb_utils.get_input_tensor_by_name(request, "sampling_parameters")
        if tensor is not None:
            raw = tensor.as_numpy().reshape(-1)[0]
            text = raw.decode() if isinstance(raw, bytes) else str(raw)
        try:
            given = json.loads(text or "{}")
        except json.JSONDecodeError as exc:
            raise ValueError(f"sampling_parameters is not JSON: {exc}") from None
        if not isinstance(given, dict):
            raise ValueError("sampling_parameters must be a JSON object")
        max_tokens = given.get("max_tokens", 16)
        if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1:
            raise ValueError("max_tokens must be a positive integer")
        stop = given.get("stop") or []
        if isinstance(stop, str):
            stop = [stop]
        return {
            "max_tokens": max_tokens,
            "temperature": float(given.get("temperature", 0) or 0),
            "seed": given.get("seed"),
            "stop": [s for s in stop if s],
            "delay_ms": float(given.get("delay_ms", self.delay_ms)),
        }

    def _response(self, text, input_tokens, output_tokens, counts_in, counts_out):
        outputs = [pb_utils.Tensor("text_output", np.array([text.encode()], dtype=np.object_))]
        if counts_in:
            outputs.append(_uint32("num_input_tokens", input_tokens))
        if counts_out:
            outputs.append(_uint32("num_output_tokens", output_tokens))
        return pb_utils.InferenceResponse(output_tensors=outputs)


def _first_stop(text, stops):
    found = [text.find(stop) for stop in stops if stop in text]
    return min(found) if found else None
