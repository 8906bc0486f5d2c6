"""How an OpenAI request reaches a model that follows Triton's text-generation conventions,
and what is read back from its responses. No I/O: a model configuration in, a plan out.

A text generator has a ``text_input`` and a ``text_output`` of type STRING (the tensors of
Triton's generate extension and of its vLLM and TensorRT-LLM models). Around them the plan
fills, when the model declares them:

- ``stream`` (BOOL): whether the client streams (vLLM's model then answers per token,
  otherwise once);
- ``exclude_input_in_output`` (BOOL): set true, so the text is the completion alone;
- ``return_num_input_tokens``, ``return_num_output_tokens`` (BOOL): set true when the
  answer reports usage (every whole answer; a stream with ``include_usage``);
- sampling fields, in the first of these forms the model takes:
  1. ``sampling_parameters`` (STRING): all of them as one JSON object, as Triton's vLLM
     model reads them;
  2. an input named after the field (``max_tokens``, ``temperature``, ``top_p``,
     ``top_k``, ``seed`` or ``random_seed``, ``stop`` or ``stop_words``, the penalties),
     typed as the model declares it, as the TensorRT-LLM ensemble takes them;
  3. otherwise a request parameter of the same name (a list as its JSON text), which
     model.py reads from ``request.parameters()``.

Any other input the model requires makes it "not a text generator" (a 400 naming the
input). Responses are read for ``text_output`` (every element, bytes) and, when present,
``num_input_tokens`` / ``num_output_tokens``: the usage reported to the client is the
largest input count and the sum of the output counts over the responses.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import orjson

from tritium.core import InferRequest, InferResponse, InputTensor
from tritium.core.datatypes import config_to_wire, numpy_dtype
from tritium.frontends.openai.errors import OpenAIError

PROMPT = "text_input"
TEXT = "text_output"
STREAM = "stream"
SAMPLING_JSON = "sampling_parameters"
INPUT_TOKENS = "num_input_tokens"
OUTPUT_TOKENS = "num_output_tokens"
#: Inputs set true when the model has them: always, and when token counts are wanted.
_EXCLUDE_INPUT = "exclude_input_in_output"
_COUNT_FLAGS = ("return_num_input_tokens", "return_num_output_tokens")
_TRUE_FLAGS = (_EXCLUDE_INPUT, *_COUNT_FLAGS)
#: OpenAI sampling field -> the input names that take it, in order of preference.
_SAMPLING_INPUTS: dict[str, tuple[str, ...]] = {
    "max_tokens": ("max_tokens",),
    "temperature": ("temperature",),
    "top_p": ("top_p",),
    "top_k": ("top_k",),
    "seed": ("seed", "random_seed"),
    "stop": ("stop", "stop_words"),
    "presence_penalty": ("presence_penalty",),
    "frequency_penalty": ("frequency_penalty",),
}
#: What a model that requires ``max_tokens`` gets when the client sends none (OpenAI's
#: default for completions).
DEFAULT_MAX_TOKENS = 16


@dataclass(frozen=True, slots=True)
class _Input:
    name: str
    datatype: str
    dims: tuple[int, ...]
    batching: bool

    def tensor(self, values: list[Any]) -> InputTensor:
        """``values`` as this input: one element per dimension of -1 that can take them."""
        shape = [len(values) if d == -1 else d for d in self.dims]
        if self.batching:
            shape.insert(0, 1)
        if self.datatype == "BYTES":
            data = np.array(
                [v.encode() if isinstance(v, str) else v for v in values], dtype=np.object_
            )
        else:
            data = np.array(values, dtype=numpy_dtype(self.datatype))
        return InputTensor(self.name, self.datatype, tuple(shape), data.reshape(shape))

    def takes(self, count: int) -> bool:
        """Whether ``count`` elements fit its dimensions."""
        free = sum(1 for d in self.dims if d == -1)
        fixed = 1
        for d in self.dims:
            if d != -1:
                fixed *= d
        return fixed == count or (free == 1 and fixed == 1)


@dataclass(frozen=True, slots=True)
class Piece:
    """What one response carries: text bytes and the token counts it reports."""

    text: bytes
    input_tokens: int | None
    output_tokens: int | None


class TextModel:
    """The plan for one loaded model version's configuration."""

    __slots__ = (
        "name",
        "decoupled",
        "_prompt",
        "_stream",
        "_json",
        "_inputs",
        "_flags",
        "_count_flags",
        "_required",
    )

    def __init__(self, name: str, config: dict[str, Any]) -> None:
        self.name = name
        self.decoupled = bool(config.get("model_transaction_policy", {}).get("decoupled"))
        batching = int(config.get("max_batch_size", 0) or 0) > 0
        inputs = {
            spec["name"]: _Input(
                spec["name"],
                config_to_wire(spec.get("data_type", "")),
                tuple(int(d) for d in spec.get("dims", ())),
                batching,
            )
            for spec in config.get("input", ())
        }
        outputs = {spec["name"]: spec for spec in config.get("output", ())}
        prompt = inputs.get(PROMPT)
        text = outputs.get(TEXT)
        if prompt is None or prompt.datatype != "BYTES" or not prompt.takes(1):
            raise _not_generator(name, f"it has no STRING input '{PROMPT}' of one element")
        if text is None or config_to_wire(text.get("data_type", "")) != "BYTES":
            raise _not_generator(name, f"it has no STRING output '{TEXT}'")
        self._prompt = prompt
        self._stream = _bool_input(inputs, STREAM)
        sampling_json = inputs.get(SAMPLING_JSON)
        self._json = sampling_json if sampling_json and sampling_json.datatype == "BYTES" else None
        exclude = _bool_input(inputs, _EXCLUDE_INPUT)
        self._flags = (exclude,) if exclude is not None else ()
        self._count_flags = tuple(i for i in (_bool_input(inputs, f) for f in _COUNT_FLAGS) if i)
        # With the JSON form every sampling field travels in it; else by input name.
        self._inputs: dict[str, _Input] = {}
        if self._json is None:
            for field, names in _SAMPLING_INPUTS.items():
                for candidate in names:
                    if candidate in inputs:
                        self._inputs[field] = inputs[candidate]
                        break
        used = {PROMPT, STREAM, SAMPLING_JSON, *_TRUE_FLAGS}
        used.update(i.name for i in self._inputs.values())
        optional = {spec["name"] for spec in config.get("input", ()) if spec.get("optional")}
        for input_name in inputs:
            if input_name not in used and input_name not in optional:
                raise _not_generator(name, f"it requires the input '{input_name}'")
        #: Sampling inputs the model cannot run without.
        self._required = tuple(f for f, i in self._inputs.items() if i.name not in optional)

    def request(
        self, prompt: str, sampling: dict[str, Any], stream: bool, counts: bool = True
    ) -> InferRequest:
        """The core request for ``prompt`` with the client's sampling fields; ``counts``:
        ask for token counts (a stream that reports no usage need not pay for them)."""
        request = InferRequest(self.name)
        inputs = [self._prompt.tensor([prompt])]
        if self._stream is not None:
            inputs.append(self._stream.tensor([stream]))
        for flag in self._flags:
            inputs.append(flag.tensor([True]))
        if counts:
            for flag in self._count_flags:
                inputs.append(flag.tensor([True]))
        if self._json is not None:
            if sampling:
                inputs.append(self._json.tensor([orjson.dumps(sampling)]))
        else:
            parameters: dict[str, Any] = {}
            for field, value in sampling.items():
                target = self._inputs.get(field)
                if target is None:
                    parameters[field] = (
                        orjson.dumps(value).decode() if isinstance(value, list) else value
                    )
                    continue
                values = value if isinstance(value, list) else [value]
                if not target.takes(len(values)):
                    raise OpenAIError(
                        400,
                        f"Model `{self.name}` takes '{field}' as input '{target.name}' of "
                        f"shape {list(target.dims)}, which cannot hold {len(values)} values.",
                        param=field,
                    )
                inputs.append(target.tensor(values))
            for field in self._required:
                if field not in sampling:
                    if field != "max_tokens":
                        raise OpenAIError(
                            400, f"Model `{self.name}` requires '{field}'.", param=field
                        )
                    inputs.append(self._inputs[field].tensor([DEFAULT_MAX_TOKENS]))
            if parameters:
                request.parameters = parameters
        request.inputs = inputs
        return request

    @staticmethod
    def read(response: InferResponse) -> Piece:
        text = b""
        input_tokens = output_tokens = None
        for output in response.outputs:
            name = output.name
            if name == TEXT:
                values = output.data.reshape(-1).tolist()
                text = b"".join(v if isinstance(v, bytes) else str(v).encode() for v in values)
            elif name == INPUT_TOKENS:
                input_tokens = _count(output.data)
            elif name == OUTPUT_TOKENS:
                output_tokens = _count(output.data)
        return Piece(text, input_tokens, output_tokens)


def _count(data: Any) -> int | None:
    flat = np.asarray(data).reshape(-1)
    return int(flat.sum()) if flat.size and flat.dtype.kind in "iu" else None


def _bool_input(inputs: dict[str, _Input], name: str) -> _Input | None:
    found = inputs.get(name)
    return found if found is not None and found.datatype == "BOOL" and found.takes(1) else None


def _not_generator(model: str, why: str) -> OpenAIError:
    return OpenAIError(
        400,
        f"Model `{model}` is not a text generator: {why} (Triton's text-generation "
        f"convention: '{PROMPT}' in, '{TEXT}' out).",
        param="model",
        code="model_not_supported",
    )
