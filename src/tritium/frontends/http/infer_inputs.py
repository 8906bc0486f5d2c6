"""The ``inputs`` of a v2 infer request's JSON decoded into tensors: data given as JSON,
as binary data after the JSON header (numpy views over the body, not copies), or in a
shared-memory region (filled by the service)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from tritium.core import datatypes
from tritium.core.datatypes import tensor_from_bytes
from tritium.core.errors import InvalidArgument
from tritium.core.types import InferRequest, InputTensor
from tritium.frontends.http.header_plans import SHM_INPUT
from tritium.frontends.http.infer_fields import (
    NOT_ARRAY,
    NOT_OBJECT,
    NOT_UINT,
    get_str,
    is_uint,
    shape_of,
    wrong_kind,
)
from tritium.frontends.http.json_tensors import decode_json_data

_CONTENT_FIELDS_MSG = (
    "Input must set only one of the following fields: 'data', 'binary_data_size' in "
    "'parameters', 'shared_memory_region' in 'parameters'. But"
)
# Placeholder data of inputs whose bytes live in a shared-memory region.
_EMPTY = np.empty(0, dtype=np.uint8)
_EMPTY.flags.writeable = False


def _check_content_fields(has_data: bool, has_binary: bool, has_shm: bool) -> None:
    """Exactly one of data, binary data and shared memory must carry an input."""
    if has_data + has_binary + has_shm == 1:
        return
    if not (has_data or has_binary or has_shm):
        raise InvalidArgument(f"{_CONTENT_FIELDS_MSG} no field is set")
    which = [
        f"'{key}'"
        for key, on in (
            ("data", has_data),
            ("binary_data_size", has_binary),
            ("shared_memory_region", has_shm),
        )
        if on
    ]
    raise InvalidArgument(f"{_CONTENT_FIELDS_MSG} set {' '.join(which)}")


def decode_inputs(
    inputs: object,
    request: InferRequest,
    body: bytes,
    offset: int,
    binary_sizes: list[int] | None = None,
    json_data: Callable[..., np.ndarray] = decode_json_data,
) -> list[InputTensor]:
    """``binary_sizes`` (optional) collects each binary input's byte size."""
    model = request.model_name
    if type(inputs) is not list:
        raise wrong_kind("inputs", NOT_ARRAY)
    end = len(body)
    view = memoryview(body)
    pending: list[tuple[InputTensor, int, memoryview]] = []
    tensors: list[InputTensor] = []
    for inp in inputs:
        if type(inp) is not dict:
            inp = {}
        params = inp.get("parameters")
        if params is None:
            # the common JSON-data input: no parameters to look at
            has_binary = has_shm = False
            if "data" not in inp:
                raise InvalidArgument(f"{_CONTENT_FIELDS_MSG} no field is set")
        else:
            if type(params) is not dict:
                raise wrong_kind("parameters", NOT_OBJECT)
            has_binary = "binary_data_size" in params
            has_shm = "shared_memory_region" in params
            _check_content_fields("data" in inp, has_binary, has_shm)
        name = inp.get("name")
        if type(name) is not str:
            name = get_str(inp, "name")
        datatype = inp.get("datatype")
        if type(datatype) is not str:
            datatype = get_str(inp, "datatype")
        shape, count = shape_of(inp, name)
        if not datatypes.is_valid(datatype):
            raise InvalidArgument(f"invalid datatype for input {name}")
        extra = dict(params) if params else {}
        if has_binary:
            size = extra.pop("binary_data_size")
            if not is_uint(size):
                raise wrong_kind("binary_data_size", NOT_UINT)
            if size > end - offset:
                raise InvalidArgument(
                    f"unexpected size for input '{name}', expecting "
                    f"{size - (end - offset)} additional bytes for model '{model}'"
                )
            tensor = InputTensor(name, datatype, shape, _EMPTY, extra)
            pending.append((tensor, count, view[offset : offset + size]))
            if binary_sizes is not None:
                binary_sizes.append(size)
            offset += size
        elif has_shm:
            # The service owns shared-memory regions; it fills ``data`` from them.
            tensor = InputTensor(name, datatype, shape, _EMPTY, extra)
            request.shared_memory = True
            if binary_sizes is not None:
                binary_sizes.append(SHM_INPUT)
        else:
            data = json_data(name, model, datatype, shape, count, inp["data"])
            tensor = InputTensor(name, datatype, shape, data, extra)
        tensors.append(tensor)
    if offset != end:
        raise InvalidArgument(f"unexpected additional input data for model '{model}'")
    if len(tensors) > 1 and len({t.name for t in tensors}) != len(tensors):
        seen: set[str] = set()
        for t in tensors:
            if t.name in seen:
                raise InvalidArgument(f"{_tag(request)}input '{t.name}' already exists in request")
            seen.add(t.name)
    try:
        for tensor, count, chunk in pending:
            tensor.data = tensor_from_bytes(
                tensor.name, model, tensor.datatype, tensor.shape, count, chunk
            )
    except InvalidArgument as exc:
        if exc.message.startswith("incomplete string data"):
            raise  # the one binary-data message Triton leaves untagged
        raise InvalidArgument(_tag(request) + exc.message) from None
    return tensors


def _tag(request: InferRequest) -> str:
    """Triton reports some input errors once the request exists, with its id."""
    return f"[request id: {request.id or '<id_unknown>'}] "
