"""Sans-IO decoding of a KServe v2 infer request body into an :class:`InferRequest`.

Two forms, as Triton's HTTP endpoint accepts them:

- JSON header of ``header_length`` bytes, then binary tensor data for the inputs that
  carry ``parameters.binary_data_size``, back to back in input order (the binary tensor
  extension). Binary inputs become numpy views over the body, not copies.
- Raw body (``Inference-Header-Content-Length: 0``): the whole body is the single
  input of the model; name, type and shape come from the model configuration.

Every size is checked against the bytes actually present before anything is
allocated, so a hostile shape answers 400 instead of exhausting memory.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import orjson

from tritium.core import datatypes
from tritium.core.datatypes import tensor_from_bytes
from tritium.core.errors import InvalidArgument
from tritium.core.types import InferRequest, InputTensor, RequestedOutput
from tritium.frontends.http.header_plans import (
    MAX_HEADER,
    SHM_INPUT,
    HeaderPlans,
    inputs_from,
    plan_from,
)
from tritium.frontends.http.json_plans import JsonPlans, json_plan_from
from tritium.frontends.http.json_slices import (
    SLICED_JSON_BYTES,
    SpanReader,
    SyntaxAt,
    Unsliceable,
    find_spans,
    skeleton,
)
from tritium.frontends.http.json_tensors import decode_json_data, decode_json_slices

FLAG_SEQUENCE_START = 1
FLAG_SEQUENCE_END = 2

_INT64_MAX = 2**63 - 1
_UINT64_MAX = 2**64 - 1
_CONTENT_FIELDS_MSG = (
    "Input must set only one of the following fields: 'data', 'binary_data_size' in "
    "'parameters', 'shared_memory_region' in 'parameters'. But"
)
# Placeholder data of inputs whose bytes live in a shared-memory region.
_EMPTY = np.empty(0, dtype=np.uint8)
_EMPTY.flags.writeable = False


@dataclass(frozen=True, slots=True)
class OutputPref:
    """How the client wants one output returned."""

    binary: bool = False
    class_count: int = 0
    shared_memory: bool = False


@dataclass(slots=True)
class OutputPrefs:
    """Output preferences of a request: explicit per-output ones, and the default for
    outputs the request did not name (``binary_data_output``; binary for raw bodies).
    Read-only once decoded: requests with the same preferences may share one.
    """

    default_binary: bool = False
    by_name: dict[str, OutputPref] = field(default_factory=dict)
    wants_classification: bool = False

    def get(self, name: str) -> OutputPref:
        pref = self.by_name.get(name)
        if pref is None:
            return BINARY_PREF if self.default_binary else JSON_PREF
        return pref


JSON_PREF = OutputPref()
BINARY_PREF = OutputPref(binary=True)
_DEFAULT_PREFS = OutputPrefs()


# ----------------------------------------------------------------------- helpers


def _not_member(key: str, what: str = "") -> InvalidArgument:
    return InvalidArgument(
        f"Unable to parse '{key}': attempt to access non-existing object member '{key}'{what}"
    )


def _wrong_kind(key: str, kind: str, prefix: str = "Unable to parse") -> InvalidArgument:
    return InvalidArgument(f"{prefix} '{key}': attempt to access JSON {kind}")


_NOT_STR = "non-string as string"
_NOT_ARRAY = "non-array as array"
_NOT_OBJECT = "non-object as object"
_NOT_UINT = "non-unsigned-integer as unsigned-integer"
_NOT_BOOL = "non-boolean as boolean"


def _is_uint(v: object) -> bool:
    return type(v) is int and 0 <= v <= _UINT64_MAX


def _get_str(obj: dict, key: str) -> str:
    v = obj.get(key)
    if type(v) is str:
        return v
    raise _not_member(key) if key not in obj else _wrong_kind(key, _NOT_STR)


def _get_object(obj: dict, key: str) -> dict:
    v = obj.get(key)
    if type(v) is dict:
        return v
    raise _not_member(key) if key not in obj else _wrong_kind(key, _NOT_OBJECT)


def parse_header_length(value: str | None, body_length: int) -> int:
    """The JSON header length from ``Inference-Header-Content-Length``.

    Absent: the whole body is JSON. 0: the body is a raw tensor. Otherwise it must be
    a whole number no larger than the body.
    """
    if value is None:
        return body_length
    if value.isdigit() and value.isascii() and int(value) <= body_length:
        return int(value)
    text = value.strip()
    if not (text.isascii() and text.lstrip("-").isdigit()):
        raise InvalidArgument(f"Unable to parse Inference-Header-Content-Length, got: {value}")
    length = int(text)
    if length < 0 or length > body_length:
        raise InvalidArgument(
            f"inference header size should be in range (0, {body_length}), got: {value}"
        )
    return length


def _shape(inp: dict, name: str) -> tuple[tuple[int, ...], int]:
    """The input's shape and element count (exact: Python ints never overflow)."""
    if "shape" not in inp:
        raise _not_member("shape")
    dims = inp["shape"]
    if type(dims) is not list:
        raise _wrong_kind("shape", _NOT_ARRAY)
    count = 1
    for d in dims:
        if type(d) is not int or d < 0 or d > _INT64_MAX:
            raise InvalidArgument(
                f"Unable to parse 'shape': attempt to access JSON {_NOT_UINT} for input '{name}'"
            )
        count *= d
    return tuple(dims), count


# ------------------------------------------------------------------ parameters


def _apply_parameters(params: object, request: InferRequest, prefs: OutputPrefs) -> None:
    if type(params) is not dict:
        raise InvalidArgument(
            "failed to get request params.: attempt to get members for non-object"
        )
    kept: dict = {}
    flags = 0
    for key, value in params.items():
        if key == "sequence_id":
            if _is_uint(value) or type(value) is str:
                request.correlation_id = value
            else:
                raise _wrong_kind("sequence_id", _NOT_STR)
        elif key == "sequence_start" or key == "sequence_end":
            if type(value) is not bool:
                raise _wrong_kind(key, _NOT_BOOL)
            if value:
                flags |= FLAG_SEQUENCE_START if key == "sequence_start" else FLAG_SEQUENCE_END
        elif key == "priority" or key == "timeout":
            if not _is_uint(value):
                raise _wrong_kind(key, _NOT_UINT)
            if key == "priority":
                request.priority = value
            else:
                request.timeout_us = value
        elif key == "binary_data_output":
            if type(value) is not bool:
                raise _wrong_kind(key, _NOT_BOOL)
            prefs.default_binary = value
        elif key.startswith("triton_"):
            raise InvalidArgument(
                "parameter keys starting with 'triton_' are reserved for Triton usage and "
                "should not be specified."
            )
        elif type(value) in (str, int, bool, float):
            kept[key] = value
        else:
            raise InvalidArgument(
                f"parameter '{key}' has invalid type. It should be either 'int', 'bool', or "
                "'string'."
            )
    request.flags = flags
    request.parameters = kept


def _apply_outputs(outputs: object, request: InferRequest, prefs: OutputPrefs) -> None:
    if type(outputs) is not list:
        raise _wrong_kind("outputs", _NOT_ARRAY)
    requested: list[RequestedOutput] = []
    for out in outputs:
        if type(out) is not dict:
            raise _not_member("name")
        params = out.get("parameters", {})
        if type(params) is not dict:
            raise _wrong_kind("parameters", _NOT_OBJECT)
        shm = "shared_memory_region" in params
        binary = params.get("binary_data", False)
        if type(binary) is not bool:
            raise _wrong_kind("binary_data", _NOT_BOOL)
        if shm and "classification" in params:
            raise InvalidArgument(
                "Output can't set both 'shared_memory_region' and 'classification'"
            )
        if shm and binary:
            raise InvalidArgument("Output can't set both 'shared_memory_region' and 'binary_data'")
        name = _get_str(out, "name")
        classes = params.get("classification", 0)
        if not _is_uint(classes):
            raise _wrong_kind("classification", _NOT_UINT, "Unable to set")
        # Triton silently keeps the first entry of a repeated output name; tritium passes
        # every entry on so the service rejects the repetition with a clear 400.
        if shm:
            request.shared_memory = True
        if name not in prefs.by_name:
            prefs.by_name[name] = OutputPref(binary, classes, shm)
            if classes:
                prefs.wants_classification = True
                if request.classification is None:
                    request.classification = {}
                request.classification[name] = classes
        requested.append(RequestedOutput(name, dict(params)))
    request.outputs = requested


# ---------------------------------------------------------------------- inputs


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


def _decode_inputs(
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
        raise _wrong_kind("inputs", _NOT_ARRAY)
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
                raise _wrong_kind("parameters", _NOT_OBJECT)
            has_binary = "binary_data_size" in params
            has_shm = "shared_memory_region" in params
            _check_content_fields("data" in inp, has_binary, has_shm)
        name = inp.get("name")
        if type(name) is not str:
            name = _get_str(inp, "name")
        datatype = inp.get("datatype")
        if type(datatype) is not str:
            datatype = _get_str(inp, "datatype")
        shape, count = _shape(inp, name)
        if not datatypes.is_valid(datatype):
            raise InvalidArgument(f"invalid datatype for input {name}")
        extra = dict(params) if params else {}
        if has_binary:
            size = extra.pop("binary_data_size")
            if not _is_uint(size):
                raise _wrong_kind("binary_data_size", _NOT_UINT)
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


_PLANS = HeaderPlans()
_JSON_PLANS = JsonPlans()


def decode_infer_request(
    model_name: str, model_version: str, body: bytes, header_length: int, cache: bool = True
) -> tuple[InferRequest, OutputPrefs]:
    """Decode a JSON (+ binary data) infer body; ``0 < header_length <= len(body)``.

    ``cache=False`` neither reads nor fills the shared plan cache (for decoding on a thread
    other than the event loop's)."""
    cacheable = cache and header_length <= MAX_HEADER
    header = body[:header_length] if cacheable else b""
    if cacheable and (header_length < len(body) or _PLANS.json_only):
        plan = _PLANS.get(header)
        if plan is not None and plan.binary_total == len(body) - header_length:
            try:
                request = plan.request(model_name, model_version)
                request.inputs = inputs_from(plan, model_name, memoryview(body), header_length)
                return request, plan.prefs  # type: ignore[return-value]
            except InvalidArgument:
                pass  # decode the slow way below for the exact message
    json_plan = _JSON_PLANS.find(body) if cacheable and header_length == len(body) else None
    if json_plan is not None:
        try:
            request = json_plan.decode(model_name, model_version, body)
            if request is not None:
                return request, json_plan.prefs  # type: ignore[return-value]
        except InvalidArgument:
            pass  # as above
    sizes: list[int] = []
    request, prefs = _decode(model_name, model_version, body, header_length, sizes)
    if (
        cacheable
        and not prefs.wants_classification
        and len(sizes) == len(request.inputs)  # no input with JSON data
        and header_length + sum(size for size in sizes if size > 0) == len(body)
    ):
        counts = [datatypes.element_count(t.shape) for t in request.inputs]
        _PLANS.put(header, plan_from(request, sizes, counts, prefs))
        return request, prefs
    if (
        cacheable
        and not sizes  # JSON data only
        and header_length == len(body)
        and json_plan is None  # a plan whose text differs later on is not replaced
        and not prefs.wants_classification
    ):
        json_plan = json_plan_from(body, request, prefs)
        if json_plan is not None:
            _JSON_PLANS.put(json_plan)
            request.layout_key = json_plan
            return request, prefs
    if not (request.shared_memory or request.parameters or request.flags):
        # Everything of the request but its data (see ``InferRequest.layout_key``): a
        # layout found valid once is not checked again.
        outputs = request.outputs
        request.layout_key = (
            request.id,
            request.correlation_id,
            tuple([(t.name, t.datatype, t.shape) for t in request.inputs]),
            None if outputs is None else tuple([o.name for o in outputs]),
        )
    return request, prefs


def _decode(
    model_name: str,
    model_version: str,
    body: bytes,
    header_length: int,
    binary_sizes: list[int] | None = None,
) -> tuple[InferRequest, OutputPrefs]:
    if header_length >= SLICED_JSON_BYTES:
        sliced = _decode_sliced(model_name, model_version, body, header_length)
        if sliced is not None:
            request, prefs, sizes = sliced
            if binary_sizes is not None:
                binary_sizes.extend(sizes)
            return request, prefs
    try:
        doc = orjson.loads(memoryview(body)[:header_length] if header_length != len(body) else body)
    except orjson.JSONDecodeError as exc:
        raise InvalidArgument(f"failed to parse the request JSON buffer: {exc}") from None
    return _build(doc, model_name, model_version, body, header_length, binary_sizes)


def _decode_sliced(
    model_name: str, model_version: str, body: bytes, header_length: int
) -> tuple[InferRequest, OutputPrefs, list[int]] | None:
    """``_decode`` of a huge JSON header whose data arrays are read a slice at a time
    (see :mod:`json_slices`); None leaves the body to the plain decoder."""
    spans = find_spans(body, header_length)
    if not spans:
        return None
    text, marks = skeleton(body, header_length, spans)
    if len(text) >= SLICED_JSON_BYTES:
        return None  # big values of other kinds (strings): one parse, as before
    try:
        doc = orjson.loads(text)
    except orjson.JSONDecodeError:
        return None  # the plain parser places the error in the whole document
    # Every placeholder must stand for an input's data, and nothing else.
    index = {mark: k for k, mark in enumerate(marks)}
    inputs = doc.get("inputs") if type(doc) is dict else None
    placed = [
        inp["data"]
        for inp in (inputs if type(inputs) is list else ())
        if type(inp) is dict and type(inp.get("data")) is str and inp["data"] in index
    ]
    if sorted(index[mark] for mark in placed) != list(range(len(marks))):
        return None
    reader = SpanReader(body, spans)

    def json_data(
        name: str, model: str, datatype: str, shape: tuple[int, ...], count: int, data: object
    ) -> np.ndarray:
        k = index.get(data) if type(data) is str else None
        if k is None:
            return decode_json_data(name, model, datatype, shape, count, data)
        span = spans[k]
        return decode_json_slices(
            name, model, datatype, shape, count, reader.values(k), span.end - span.start
        )

    sizes: list[int] = []
    try:
        try:
            request, prefs = _build(
                doc, model_name, model_version, body, header_length, sizes, json_data
            )
        except InvalidArgument:
            reader.check_rest()  # a syntax error anywhere is reported first
            raise
    except SyntaxAt as exc:
        message = reader.message(exc)
        raise InvalidArgument(f"failed to parse the request JSON buffer: {message}") from None
    except Unsliceable:
        return None
    return request, prefs, sizes


def _build(
    doc: object,
    model_name: str,
    model_version: str,
    body: bytes,
    header_length: int,
    binary_sizes: list[int] | None = None,
    json_data: Callable[..., np.ndarray] = decode_json_data,
) -> tuple[InferRequest, OutputPrefs]:
    if type(doc) is not dict:
        raise _not_member("inputs")
    request = InferRequest(model_name, model_version)
    # Only parameters and outputs change the defaults, which are shared (read-only).
    prefs = OutputPrefs() if "parameters" in doc or "outputs" in doc else _DEFAULT_PREFS
    if "id" in doc:
        request.id = _get_str(doc, "id")
    if "parameters" in doc:
        _apply_parameters(doc["parameters"], request, prefs)
    if "inputs" not in doc:
        raise _not_member("inputs")
    request.inputs = _decode_inputs(
        doc["inputs"], request, body, header_length, binary_sizes, json_data
    )
    if "outputs" in doc:
        _apply_outputs(doc["outputs"], request, prefs)
    return request, prefs


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
