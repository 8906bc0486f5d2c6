"""Sans-IO conversion between ``ModelInferRequest``/``ModelInferResponse`` and core objects.

Inputs come from ``raw_input_contents`` (one entry per input, in input order, as
tritonclient sends them) or from the typed ``contents`` fields. Every size is checked
against the shape before anything is allocated, so a hostile shape answers
INVALID_ARGUMENT instead of exhausting memory. Fixed-size raw inputs become numpy views
over the received bytes. Responses carry one ``raw_output_contents`` entry per output
(BYTES length-prefixed; empty for an output written to shared memory), exactly as Triton
fills them. Inputs and outputs naming a ``shared_memory_region`` are marked for the service,
which resolves the regions.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from tritonclient.grpc import service_pb2

from tritium.core import datatypes
from tritium.core.errors import InvalidArgument, Unsupported
from tritium.core.types import (
    InferRequest,
    InferResponse,
    InputTensor,
    RequestedOutput,
)

FLAG_SEQUENCE_START = 1
FLAG_SEQUENCE_END = 2

# Typed ``contents`` field that carries each wire type (FP16/BF16 only travel raw).
_CONTENTS_FIELD: dict[str, str] = {
    "BOOL": "bool_contents",
    "INT8": "int_contents",
    "INT16": "int_contents",
    "INT32": "int_contents",
    "INT64": "int64_contents",
    "UINT8": "uint_contents",
    "UINT16": "uint_contents",
    "UINT32": "uint_contents",
    "UINT64": "uint64_contents",
    "FP32": "fp32_contents",
    "FP64": "fp64_contents",
    "BYTES": "bytes_contents",
}
_ALL_CONTENTS = tuple(sorted(set(_CONTENTS_FIELD.values())))
# The type Triton names when a field is used for another type's input.
_CONTENTS_TYPE = {
    "bool_contents": "BOOL",
    "int_contents": "INT32",
    "int64_contents": "INT64",
    "uint_contents": "UINT32",
    "uint64_contents": "UINT64",
    "fp32_contents": "FP32",
    "fp64_contents": "FP64",
    "bytes_contents": "BYTES",
}
# Placeholder data of inputs whose bytes live in a shared-memory region.
_EMPTY = np.empty(0, dtype=np.uint8)
_EMPTY.flags.writeable = False


# ------------------------------------------------------------------ parameters


def parameter_value(param: service_pb2.InferParameter) -> Any:
    """The Python value of one ``InferParameter`` (None when unset)."""
    choice = param.WhichOneof("parameter_choice")
    return None if choice is None else getattr(param, choice)


def parameters_to_dict(params: Any) -> dict[str, Any]:
    """A protobuf ``map<string, InferParameter>`` as a plain dict."""
    return {key: parameter_value(value) for key, value in params.items()}


def set_parameter(param: service_pb2.InferParameter, value: Any) -> None:
    """Fill ``param`` from a Python value (bool before int: bool is an int)."""
    if isinstance(value, bool):
        param.bool_param = value
    elif isinstance(value, (int, np.integer)):
        value = int(value)
        if value > 2**63 - 1:
            param.uint64_param = value
        else:
            param.int64_param = value
    elif isinstance(value, (float, np.floating)):
        param.double_param = float(value)
    elif isinstance(value, str):
        param.string_param = value
    else:
        raise Unsupported(
            f"Response parameter of type '{type(value).__name__}' is not currently supported"
        )


def _apply_parameters(params: Any, request: InferRequest) -> None:
    kept: dict[str, Any] = {}
    flags = 0
    for key, param in params.items():
        choice = param.WhichOneof("parameter_choice")
        value: Any = None if choice is None else getattr(param, choice)
        if key == "sequence_id":
            if choice not in ("int64_param", "uint64_param", "string_param"):
                raise InvalidArgument(
                    "invalid value type for 'sequence_id' parameter, expected "
                    "int64_param, uint64_param or string_param."
                )
            request.correlation_id = value
        elif key in ("sequence_start", "sequence_end"):
            if choice != "bool_param":
                raise InvalidArgument(
                    f"invalid value type for '{key}' parameter, expected bool_param."
                )
            if value:
                flags |= FLAG_SEQUENCE_START if key == "sequence_start" else FLAG_SEQUENCE_END
        elif key in ("priority", "timeout"):
            if choice not in ("int64_param", "uint64_param") or value < 0:
                raise InvalidArgument(
                    f"invalid value type for '{key}' parameter, expected int64_param or "
                    "uint64_param."
                )
            if key == "priority":
                request.priority = value
            else:
                request.timeout_us = value
        elif key == "triton_enable_empty_final_response":
            # Sent by Triton's own streaming clients (perf_analyzer); it only matters for
            # decoupled models on a stream.
            if choice != "bool_param":
                raise InvalidArgument(
                    f"invalid value type for '{key}' parameter, expected bool_param."
                )
            request.empty_final = value
        elif key.startswith("triton_"):
            raise InvalidArgument(
                "parameter keys starting with 'triton_' are reserved for Triton usage. Only "
                "the following keys starting with 'triton_' are allowed: "
                "triton_enable_empty_final_response"
            )
        else:
            kept[key] = value
    request.flags = flags
    request.parameters = kept


# ---------------------------------------------------------------------- inputs


def _shape(tensor: service_pb2.ModelInferRequest.InferInputTensor) -> tuple[tuple[int, ...], int]:
    count = 1
    for d in tensor.shape:
        if d < 0:
            raise InvalidArgument(
                f"invalid shape for input '{tensor.name}': dimensions must not be negative, "
                f"got {list(tensor.shape)}"
            )
        count *= d
    return tuple(tensor.shape), count


def _from_contents(
    tensor: service_pb2.ModelInferRequest.InferInputTensor,
    model: str,
    shape: tuple[int, ...],
    count: int,
    request_id: str,
) -> np.ndarray:
    name, datatype = tensor.name, tensor.datatype
    contents = tensor.contents
    field = _CONTENTS_FIELD.get(datatype)
    if field is None:
        raise InvalidArgument(
            f"'{datatype}' input '{name}' for model '{model}' must be sent in "
            "raw_input_contents: it has no typed contents field"
        )
    for other in _ALL_CONTENTS:
        if other != field and len(getattr(contents, other)):
            raise InvalidArgument(
                f"unexpected explicit tensor data for input tensor '{name}' for model "
                f"'{model}' of type '{_CONTENTS_TYPE[other]}', expected datatype '{datatype}'"
            )
    values = getattr(contents, field)
    if len(values) != count:
        if datatype == "BYTES":
            raise InvalidArgument(
                f"{_tag(request_id)}expected {count} string elements for inference input "
                f"'{name}' for model '{model}', got {len(values)}"
            )
        size = datatypes.element_size(datatype)
        raise InvalidArgument(
            f"{_tag(request_id)}input byte size mismatch for input '{name}' for model "
            f"'{model}'. Expected {count * size}, got {len(values) * size}"
        )
    if datatype == "BYTES":
        out = np.empty(count, dtype=np.object_)
        out[:] = list(values)
        return out.reshape(shape)
    try:
        return np.array(values, dtype=datatypes.numpy_dtype(datatype)).reshape(shape)
    except OverflowError:
        raise InvalidArgument(
            f"value out of range for {datatype} input '{name}' for model '{model}'"
        ) from None


def _tag(request_id: str) -> str:
    return f"[request id: {request_id or '<id_unknown>'}] "


def _has_contents(tensor: service_pb2.ModelInferRequest.InferInputTensor) -> bool:
    if not tensor.HasField("contents"):
        return False
    contents = tensor.contents
    return any(len(getattr(contents, f)) for f in _ALL_CONTENTS)


def decode_infer_request(
    message: service_pb2.ModelInferRequest,
    raw: Sequence[bytes | memoryview] | None = None,
) -> InferRequest:
    """A core :class:`InferRequest` from a ``ModelInferRequest``; ``raw``, when given,
    stands for its ``raw_input_contents`` (views of a big message's bytes that protobuf
    was spared copying)."""
    model = message.model_name
    request = InferRequest(model, message.model_version, message.id)
    if message.parameters:
        _apply_parameters(message.parameters, request)
    # Inputs in shared memory have no raw content: the others take raw_input_contents in
    # order (tritonclient sends them so). Each input is checked in turn, as Triton does, so
    # the first input in error is the one named.
    if raw is None:
        raw = message.raw_input_contents
    inputs: list[InputTensor] = []
    seen: set[str] = set()
    index = 0
    for tensor in message.inputs:
        name, datatype = tensor.name, tensor.datatype
        if name in seen:
            raise InvalidArgument(f"input '{name}' already exists in request")
        seen.add(name)
        if not datatypes.is_valid(datatype):
            raise InvalidArgument(f"invalid datatype '{datatype}' for input '{name}'")
        params = parameters_to_dict(tensor.parameters) if tensor.parameters else {}
        shape, count = _shape(tensor)
        has_contents = _has_contents(tensor)
        if "shared_memory_region" in params:
            if has_contents:
                raise InvalidArgument(
                    f"contents field must not be specified when using shared memory for "
                    f"input '{name}' for model '{model}'"
                )
            # The service reads the data from the region.
            request.shared_memory = True
            inputs.append(InputTensor(name, datatype, shape, _EMPTY, params))
            continue
        if len(raw) and tensor.HasField("contents"):
            # Set at all, even empty, as Triton checks it.
            raise InvalidArgument(
                f"contents field must not be specified when using raw_input_contents "
                f"for '{name}' for model '{model}'"
            )
        if index < len(raw):
            # The same checks and texts as HTTP's binary data: one decoder for both.
            try:
                data = datatypes.tensor_from_bytes(
                    name, model, datatype, shape, count, raw[index]
                )
            except InvalidArgument as exc:
                # Triton checks sizes once the request exists, so they carry its id.
                if not exc.message.startswith("input byte size mismatch"):
                    raise
                raise InvalidArgument(_tag(message.id) + exc.message) from None
            index += 1
        elif has_contents:
            data = _from_contents(tensor, model, shape, count, message.id)
        elif count == 0:
            data = np.empty(shape, dtype=datatypes.numpy_dtype(datatype))
        else:
            raise InvalidArgument(
                f"unable to find data for input tensor '{name}' for model '{model}' in request."
            )
        inputs.append(InputTensor(name, datatype, shape, data, params))
    if index < len(raw):
        # Triton ignores the extra contents; they are a client's mistake, so say so.
        raise InvalidArgument(
            f"expected {index} raw input contents (one per input not in shared memory) for "
            f"model '{model}', got {len(raw)}"
        )
    request.inputs = inputs
    if message.outputs:
        request.outputs = [_requested_output(out, request) for out in message.outputs]
    return request


def _requested_output(
    out: service_pb2.ModelInferRequest.InferRequestedOutputTensor, request: InferRequest
) -> RequestedOutput:
    """One requested output; marks the request for shared memory and classification."""
    if not out.parameters:
        return RequestedOutput(out.name, {})
    params = parameters_to_dict(out.parameters)
    shm = "shared_memory_region" in params
    if shm:
        request.shared_memory = True
    if "classification" in params:
        # Triton's checks and texts (tritonclient sends ``class_count`` as int64_param).
        if out.parameters["classification"].WhichOneof("parameter_choice") != "int64_param":
            raise InvalidArgument(
                "invalid value type for 'classification' parameter, expected int64_param"
            )
        classes = params["classification"]
        if classes <= 0:
            raise InvalidArgument("invalid value for 'classification' parameter, expected >= 0")
        if shm:
            raise InvalidArgument(
                "output can't set both 'shared_memory_region' and 'classification'"
            )
        if request.classification is None:
            request.classification = {}
        request.classification.setdefault(out.name, classes)
    return RequestedOutput(out.name, params)


# ------------------------------------------------------------------- response


def raw_output_bytes(datatype: str, array: np.ndarray) -> bytes:
    """One output's ``raw_output_contents`` entry (BYTES length-prefixed)."""
    if datatype == "BYTES":
        return bytes(datatypes.wire_bytes(array))
    return np.ascontiguousarray(array, dtype=datatypes.raw_dtype(datatype)).tobytes()


def encode_infer_response(
    response: InferResponse, request_id: str = ""
) -> service_pb2.ModelInferResponse:
    """A ``ModelInferResponse`` with one raw output content per output, in order."""
    message = service_pb2.ModelInferResponse(
        model_name=response.model_name,
        model_version=response.model_version,
        id=response.id or request_id,
    )
    for key, value in response.parameters.items():
        set_parameter(message.parameters[key], value)
    raw: list[bytes] = []
    for out in response.outputs:
        tensor = message.outputs.add()
        tensor.name = out.name
        tensor.datatype = out.datatype
        tensor.shape.extend(int(d) for d in out.shape)
        for key, value in out.parameters.items():
            set_parameter(tensor.parameters[key], value)
        # Triton keeps one entry per output: an empty one for an output in shared memory.
        raw.append(b"" if out.shared_memory else raw_output_bytes(out.datatype, out.data))
    message.raw_output_contents.extend(raw)
    return message
