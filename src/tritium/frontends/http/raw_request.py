"""Decoding a raw-tensor infer body (``Inference-Header-Content-Length: 0``): the whole
body is the model's single input, whose name, type and shape come from the model
configuration, as Triton deduces them."""

from __future__ import annotations

import numpy as np

from tritium.core import datatypes
from tritium.core.datatypes import tensor_from_bytes
from tritium.core.errors import InvalidArgument
from tritium.core.types import InferRequest, InputTensor
from tritium.frontends.http.output_prefs import OutputPrefs


def decode_raw_request(
    model_name: str, model_version: str, body: bytes, config: dict
) -> tuple[InferRequest, OutputPrefs]:
    """Decode a raw-tensor body for the model's single input (Triton's deduction).

    ``config`` is the model configuration JSON (``input``, ``max_batch_size``). Outputs
    of a raw request come back binary, as Triton returns them.
    """
    inputs = config.get("input") or []
    if len(inputs) != 1:
        raise InvalidArgument(
            f"Raw request must only have 1 input (found 1) to be deduced but got "
            f"{len(inputs)} inputs in '{model_name}' model configuration"
        )
    spec = inputs[0]
    name = spec.get("name", "")
    datatype = datatypes.config_to_wire(spec.get("data_type", ""))
    if not datatypes.is_valid(datatype):
        raise InvalidArgument(f"invalid datatype for input {name}")
    shape = [1] if int(config.get("max_batch_size", 0) or 0) != 0 else []
    dynamic = -1
    fixed = 1
    for d in spec.get("dims", []):
        d = int(d)
        if d == -1:
            if dynamic != -1:
                raise InvalidArgument(
                    f"The shape of the raw input '{name}' can not be deduced because there "
                    "are more than one variable-sized dimension"
                )
            dynamic = len(shape)
        else:
            fixed *= d
        shape.append(d)
    if datatype == "BYTES":
        if dynamic != -1 or fixed != 1:
            raise InvalidArgument(
                f"For BYTE datatype raw input '{name}', the model must have input shape [1]"
            )
        data = np.empty(1, dtype=np.object_)
        data[0] = bytes(body)
        tensor = InputTensor(name, datatype, tuple(shape), data.reshape(shape))
    else:
        if dynamic != -1:
            unit = fixed * datatypes.element_size(datatype)
            shape[dynamic] = len(body) // unit if unit else 0
        count = 1
        for d in shape:
            count *= d
        data = tensor_from_bytes(name, model_name, datatype, tuple(shape), count, body)
        tensor = InputTensor(name, datatype, tuple(shape), data)
    request = InferRequest(model_name, model_version, inputs=[tensor])
    return request, OutputPrefs(default_binary=True)
