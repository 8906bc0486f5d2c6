"""Sans-IO decoding of a KServe v2 infer body with a JSON header into an
:class:`InferRequest`.

The body is a JSON header of ``header_length`` bytes, then binary tensor data for the
inputs that carry ``parameters.binary_data_size``, back to back in input order (the binary
tensor extension); binary inputs become numpy views over the body, not copies. Headers
seen before are decoded from a plan (``header_plans``, ``json_plans``); huge JSON data is
read a slice at a time (``json_slices``); otherwise the document is read member by member
(``infer_parameters``, ``infer_inputs``). A raw body (``Inference-Header-Content-Length:
0``) is decoded by ``raw_request``.

Every size is checked against the bytes actually present before anything is
allocated, so a hostile shape answers 400 instead of exhausting memory.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import orjson

from tritium.core import datatypes
from tritium.core.errors import InvalidArgument
from tritium.core.types import InferRequest
from tritium.frontends.http.header_plans import MAX_HEADER, HeaderPlans, inputs_from, plan_from
from tritium.frontends.http.infer_fields import get_str, not_member
from tritium.frontends.http.infer_inputs import decode_inputs
from tritium.frontends.http.infer_parameters import apply_outputs, apply_parameters
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
from tritium.frontends.http.output_prefs import DEFAULT_PREFS, OutputPrefs


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


_PLANS = HeaderPlans()
_JSON_PLANS = JsonPlans()
ID_FIRST = b'{"id":"'


def without_id(header: bytes) -> tuple[bytes, str | None]:
    """``header`` less a leading ``"id"`` member, and that id; ``(header, None)`` unless
    the id is a plain string (no escapes, printable), whose bytes are then its text."""
    end = header.find(b'"', 7)
    if end < 0 or header[end + 1 : end + 2] != b"," or b"\\" in header[7:end]:
        return header, None
    try:
        request_id = header[7:end].decode()
    except UnicodeDecodeError:
        return header, None
    if not request_id.isprintable():
        return header, None
    return b"{" + header[end + 2 :], request_id


def decode_infer_request(
    model_name: str, model_version: str, body: bytes, header_length: int, cache: bool = True
) -> tuple[InferRequest, OutputPrefs]:
    """Decode a JSON (+ binary data) infer body; ``0 < header_length <= len(body)``.

    ``cache=False`` neither reads nor fills the shared plan cache (for decoding on a thread
    other than the event loop's)."""
    cacheable = cache and header_length <= MAX_HEADER
    header = body[:header_length] if cacheable else b""
    request_id = None
    if cacheable and (header_length < len(body) or _PLANS.json_only):
        if header.startswith(ID_FIRST):
            # Clients number their requests (perf_analyzer does): the plan is keyed by
            # the header without its id, which is put back into each request.
            header, request_id = without_id(header)
        plan = _PLANS.get(header)
        if plan is not None and plan.binary_total == len(body) - header_length:
            try:
                request = plan.request(model_name, model_version)
                if request_id is not None:
                    request.id = request_id
                request.inputs = inputs_from(plan, model_name, memoryview(body), header_length)
                return request, plan.prefs  # type: ignore[return-value]
            except InvalidArgument:
                pass  # decode the slow way below for the exact message
    json_plan = _JSON_PLANS.find(body) if cacheable and header_length == len(body) else None
    if json_plan is not None:
        try:
            planned = json_plan.decode(model_name, model_version, body)
            if planned is not None:
                return planned, json_plan.prefs  # type: ignore[return-value]
        except InvalidArgument:
            pass  # as above
    sizes: list[int] = []
    request, prefs = _decode(model_name, model_version, body, header_length, sizes)
    if (
        cacheable
        and not prefs.wants_classification
        and len(sizes) == len(request.inputs)  # no input with JSON data
        and header_length + sum(size for size in sizes if size > 0) == len(body)
        and (request_id is None or request_id == request.id)  # not a second "id" member
    ):
        counts = [datatypes.element_count(t.shape) for t in request.inputs]
        plan = plan_from(request, sizes, counts, prefs, "" if request_id is not None else None)
        _PLANS.put(header, plan)
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
        raise not_member("inputs")
    request = InferRequest(model_name, model_version)
    # Only parameters and outputs change the defaults, which are shared (read-only).
    prefs = OutputPrefs() if "parameters" in doc or "outputs" in doc else DEFAULT_PREFS
    if "id" in doc:
        request.id = get_str(doc, "id")
    if "parameters" in doc:
        apply_parameters(doc["parameters"], request, prefs)
    if "inputs" not in doc:
        raise not_member("inputs")
    request.inputs = decode_inputs(
        doc["inputs"], request, body, header_length, binary_sizes, json_data
    )
    if "outputs" in doc:
        apply_outputs(doc["outputs"], request, prefs)
    return request, prefs
