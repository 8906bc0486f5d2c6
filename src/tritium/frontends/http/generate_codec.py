"""Triton's generate extension without I/O: a ``$generate_request`` JSON object to a
core request, a response to a ``$generate_response`` object, and SSE event bytes.

Request fields named after a model input become that input (a string, number or
boolean is one element; an array gives the shape of its nesting; a batching model gets a
leading batch dimension of 1); ``parameters`` and every other field are request
parameters; ``id`` is the request id. A response answers ``id`` (when given),
``model_name``, ``model_version`` and one field per output: one element as a JSON value,
more as a flat array.
"""

from __future__ import annotations

from typing import Any

import orjson

from tritium.core import InferRequest, InferResponse, InputTensor
from tritium.core.errors import InvalidArgument
from tritium.frontends.http.json_tensors import decode_json_data, encode_json_data

_SCALARS = (str, int, float, bool)


def _shape_of(value: Any) -> tuple[int, ...]:
    shape = []
    while type(value) is list:
        shape.append(len(value))
        value = value[0] if value else None
    return tuple(shape)


def decode_generate_request(
    model: str, version: str, body: bytes, config: dict[str, Any]
) -> InferRequest:
    """A core request from a generate body, against the model's configuration."""
    try:
        doc = orjson.loads(body) if body else None
    except orjson.JSONDecodeError as exc:
        raise InvalidArgument(f"failed to parse the request JSON buffer: {exc}") from None
    if type(doc) is not dict:
        raise InvalidArgument("generate request must be a JSON object")
    inputs = {i["name"]: i for i in config.get("input", ())}
    batching = int(config.get("max_batch_size", 0) or 0) > 0
    request = InferRequest(model, version)
    parameters: dict[str, Any] = {}
    for key, value in doc.items():
        if key == "id":
            if type(value) is not str:
                raise InvalidArgument("Unable to parse 'id': attempt to access JSON non-string")
            request.id = value
        elif key == "parameters":
            if type(value) is not dict:
                raise InvalidArgument("Unable to parse 'parameters': expected a JSON object")
            for name, param in value.items():
                if not isinstance(param, _SCALARS):
                    raise InvalidArgument(
                        f"parameter '{name}' must be a string, a number or a boolean"
                    )
                parameters[name] = param
        elif key in inputs:
            spec = inputs[key]
            datatype = spec["data_type"].removeprefix("TYPE_")
            if datatype == "STRING":
                datatype = "BYTES"
            data = value if type(value) is list else [value]
            shape = _shape_of(data)
            if batching:
                shape = (1, *shape)
            count = 1
            for dim in shape:
                count *= dim
            array = decode_json_data(key, model, datatype, shape, count, data)
            request.inputs.append(InputTensor(key, datatype, shape, array))
        elif isinstance(value, _SCALARS):
            parameters[key] = value
        else:
            raise InvalidArgument(
                f"generate request field '{key}' is neither an input of model '{model}' "
                "nor a parameter (a string, a number or a boolean)"
            )
    if parameters:
        request.parameters = parameters
    return request


def generate_response_json(response: InferResponse, request_id: str) -> bytes:
    """The ``$generate_response`` object of one response."""
    doc: dict[str, Any] = {}
    if request_id:
        doc["id"] = request_id
    doc["model_name"] = response.model_name
    doc["model_version"] = response.model_version
    for output in response.outputs:
        values = encode_json_data(output.name, output.datatype, output.data)
        flat = values.tolist() if hasattr(values, "tolist") else values
        doc[output.name] = flat[0] if len(flat) == 1 else flat
    return orjson.dumps(doc)


def error_json(message: str) -> bytes:
    return orjson.dumps({"error": message})


def sse_event(data: bytes) -> bytes:
    """One Server-Sent Event carrying ``data`` (a JSON document: no newlines)."""
    return b"data: " + data + b"\n\n"
