"""Exact reuse of decoded ``ModelInferRequest`` headers, straight from the message bytes.

Clients send the same request again and again: the same model, inputs, shapes and outputs,
only the tensor bytes (and perhaps the id) change. Serialised, such a message is its
header fields (1–6) followed by its ``raw_input_contents`` entries (field 7), so one scan
of the top-level fields splits it into a header key (the header bytes, less the id field)
and views of the raw contents. The first time a key is seen, the message is parsed by
protobuf and decoded by :func:`decode_infer_request`, the reference; when that succeeds
with every input raw, the result becomes a plan. Later messages with the same key are
rebuilt from the plan and numpy views over their raw contents (no protobuf parsing, no
copies, validation reused through ``layout_key``); inputs in shared memory take no raw
content and are left for the service to read, as the reference does. Anything else — typed
contents, a size that does not match, fields in an unusual order — takes the reference
path, so errors and their texts are the reference's.

The last message that a plan built also leaves its byte layout behind (the header around
its id, the field heads of its fixed-size raw contents): the next message with exactly that
layout — the usual case, one client repeating itself — is split by a few byte comparisons
instead of a field-by-field scan, into the same key, id and raw contents the scan gives.
"""

from __future__ import annotations

import math
from collections import OrderedDict
from dataclasses import dataclass

import numpy as np
from tritonclient.grpc import service_pb2

from tritium.core import datatypes
from tritium.core.types import InferRequest, InputTensor, Parameters, RequestSettings
from tritium.frontends.grpc.infer_codec import decode_infer_request

MAX_PLANS = 256
MAX_KEY = 16 * 1024

_ModelInferRequest = service_pb2.ModelInferRequest
# Length-delimited tags of ModelInferRequest's fields 1–7 (all strings, messages, bytes).
_HEADER_TAGS = frozenset((0x0A, 0x12, 0x22, 0x2A, 0x32))
_ID_TAG = 0x1A
_RAW_TAG = 0x3A
_SHM_REGION = "shared_memory_region"
_EMPTY = np.empty(0, np.uint8)  # data of a shared-memory input until the service reads it
_EMPTY.flags.writeable = False


@dataclass(frozen=True, slots=True)
class _InputPlan:
    name: str
    datatype: str
    shape: tuple[int, ...]
    count: int
    size: int  # bytes expected; -1 for BYTES, whose content is checked every time
    dtype: np.dtype | None
    parameters: Parameters
    shm: bool  # read from a shared-memory region by the service: no raw content


@dataclass(frozen=True, slots=True, eq=False)  # identity hash: the plan is the layout key
class RequestPlan:
    """What every request with one header key decodes to, less its id and tensor bytes."""

    model_name: str
    model_version: str
    settings: RequestSettings
    inputs: tuple[_InputPlan, ...]
    raw_count: int

    def build(self, request_id: str, raws: list[memoryview]) -> InferRequest | None:
        """The request for these raw contents; None when one does not fit its input
        (the reference path then answers with its error)."""
        if len(raws) != self.raw_count:
            return None
        tensors = []
        index = 0
        for spec in self.inputs:
            params = spec.parameters
            if spec.shm:
                tensors.append(
                    InputTensor(spec.name, spec.datatype, spec.shape, _EMPTY, dict(params))
                )
                continue
            raw = raws[index]
            index += 1
            if spec.dtype is None:
                try:
                    data = datatypes.tensor_from_bytes(
                        spec.name, self.model_name, "BYTES", spec.shape, spec.count, raw
                    )
                except Exception:
                    return None
            elif len(raw) != spec.size:
                return None
            else:
                data = np.ndarray(spec.shape, spec.dtype, raw)  # a read-only view
            tensors.append(
                InputTensor(
                    spec.name, spec.datatype, spec.shape, data, dict(params) if params else {}
                )
            )
        request = InferRequest(self.model_name, self.model_version, request_id, tensors)
        request.layout_key = self
        self.settings.apply(request)
        return request


@dataclass(slots=True)
class _Fields:
    """Where the top-level fields of a message in the usual order lie."""

    header_end: int  # the header fields (1-6) end where the raw contents begin
    id_field: tuple[int, int, int] | None  # (field start, value start, end) of the id
    raws: list[tuple[int, int, int]]  # (field start, value start, end) per raw content


def field_at(view: bytes | memoryview, pos: int) -> tuple[int, int, int] | None:
    """(tag, value start, end) of the length-delimited field at ``pos``; None when the
    bytes there are not one."""
    n = len(view)
    if pos + 1 >= n:
        return None
    length = view[pos + 1]
    start = pos + 2
    if length & 0x80:
        length &= 0x7F
        shift = 7
        while True:
            if start >= n or shift > 28:
                return None
            byte = view[start]
            start += 1
            length |= (byte & 0x7F) << shift
            if not byte & 0x80:
                break
            shift += 7
    end = start + length
    return None if end > n else (view[pos], start, end)


def _fields(view: memoryview) -> _Fields | None:
    """The fields of a message in the usual field order; None for anything else."""
    n = len(view)
    pos = 0
    header_end = -1
    id_field = None
    raws: list[tuple[int, int, int]] = []
    while pos < n:
        found = field_at(view, pos)
        if found is None:
            return None
        tag, start, end = found
        if tag == _RAW_TAG:
            if header_end < 0:
                header_end = pos
            raws.append((pos, start, end))
        elif header_end >= 0:
            return None  # a header field after the raw contents
        elif tag == _ID_TAG:
            if id_field is not None:
                return None
            id_field = (pos, start, end)
        elif tag not in _HEADER_TAGS:
            return None
        pos = end
    if header_end < 0:
        header_end = n
    if header_end > MAX_KEY:
        return None
    return _Fields(header_end, id_field, raws)


def _split(view: memoryview, fields: _Fields) -> tuple[bytes, str, list[memoryview]] | None:
    """(header key, request id, raw contents) of a message with these fields."""
    raws = [view[start:end] for _, start, end in fields.raws]
    header_end = fields.header_end
    if fields.id_field is None:
        return bytes(view[:header_end]), "", raws
    id_start, value_start, id_end = fields.id_field
    try:
        request_id = str(view[value_start:id_end], "utf-8")
    except UnicodeDecodeError:
        return None
    return bytes(view[:id_start]) + bytes(view[id_end:header_end]), request_id, raws


def scan(data: bytes | memoryview) -> tuple[bytes, str, list[memoryview]] | None:
    """(header key, request id, raw contents) of a message in the usual field order;
    None for anything else (the caller then parses it with protobuf)."""
    view = memoryview(data)
    fields = _fields(view)
    return None if fields is None else _split(view, fields)


@dataclass(frozen=True, slots=True)
class _Layout:
    """The bytes of a message that a plan built, less its id and tensor contents."""

    before_id: bytes  # header bytes up to where the id field is (or would be)
    after_id: bytes  # header bytes after the id field
    raw_heads: tuple[tuple[bytes, int], ...]  # (tag + length varint, length) per raw content
    size: int  # message length without the id field
    plan: RequestPlan

    @classmethod
    def of(cls, view: memoryview, fields: _Fields, plan: RequestPlan) -> _Layout | None:
        """The layout of ``view`` (with these fields), which ``plan`` built; None when the
        plan has a content of variable size (BYTES) or the id's length takes two bytes."""
        if any(spec.size < 0 for spec in plan.inputs if not spec.shm):
            return None
        header_end = fields.header_end
        if fields.id_field is None:
            id_start = id_end = header_end
        else:
            id_start, value_start, id_end = fields.id_field
            if value_start != id_start + 2:
                return None
        heads = tuple((bytes(view[pos:start]), end - start) for pos, start, end in fields.raws)
        return cls(
            bytes(view[:id_start]),
            bytes(view[id_end:header_end]),
            heads,
            len(view) - (id_end - id_start),
            plan,
        )

    def split(self, view: memoryview) -> tuple[str, list[memoryview]] | None:
        """(id, raw contents) of a message with this layout — what ``scan`` gives for
        it — or None when it has another layout."""
        before = self.before_id
        pos = len(before)
        n = len(view)
        if view[:pos] != before:
            return None
        request_id = ""
        if pos + 1 < n and view[pos] == _ID_TAG:
            length = view[pos + 1]
            if length & 0x80:
                return None
            start = pos + 2
            pos = start + length
            try:
                request_id = str(view[start:pos], "utf-8")
            except UnicodeDecodeError:
                return None
        if n - (pos - len(before)) != self.size:
            return None
        after = self.after_id
        end = pos + len(after)
        if view[pos:end] != after:
            return None
        raws = []
        for head, length in self.raw_heads:
            pos = end + len(head)
            if view[end:pos] != head:
                return None
            end = pos + length
            raws.append(view[pos:end])
        return request_id, raws


def _plan_for(request: InferRequest, raw_count: int) -> RequestPlan | None:
    if request.classification is not None:
        return None  # rare: such requests take the reference path every time
    shm_inputs = sum(1 for t in request.inputs if _SHM_REGION in t.parameters)
    if raw_count != len(request.inputs) - shm_inputs:
        return None
    inputs = []
    for tensor in request.inputs:
        datatype = tensor.datatype
        if _SHM_REGION in tensor.parameters:
            inputs.append(
                _InputPlan(
                    tensor.name, datatype, tensor.shape, 0, 0, None, tensor.parameters, True
                )
            )
            continue
        count = math.prod(tensor.shape)
        if datatype == "BYTES":
            size, dtype = -1, None
        else:
            dtype = datatypes.raw_dtype(datatype)
            size = count * dtype.itemsize
        inputs.append(
            _InputPlan(
                tensor.name, datatype, tensor.shape, count, size, dtype, tensor.parameters, False
            )
        )
    return RequestPlan(
        request.model_name,
        request.model_version,
        RequestSettings.of(request),
        tuple(inputs),
        raw_count,
    )


#: Messages at least this big are parsed by protobuf without their raw contents (a 64 MiB
#: tensor cost 80 ms of copies on the event loop, holding every other client).
LIFTED_BYTES = 512 * 1024


def _decode_message(
    data: bytes | memoryview, view: memoryview, fields: _Fields, raws: list[memoryview]
) -> InferRequest:
    """``decode_infer_request(ModelInferRequest.FromString(data))``. A big message's header
    (every field before the raw contents) is parsed alone and its contents stay views:
    that is the same message, since raw contents are bytes protobuf does not check."""
    if len(view) < LIFTED_BYTES:
        return decode_infer_request(_ModelInferRequest.FromString(data))
    header = _ModelInferRequest.FromString(view[: fields.header_end])
    return decode_infer_request(header, raws)


class RequestPlans:
    """Plans by header key (None for keys that take the reference path), bounded: the
    oldest is dropped first."""

    def __init__(self, limit: int = MAX_PLANS) -> None:
        self._plans: OrderedDict[bytes, RequestPlan | None] = OrderedDict()
        self._limit = limit
        self._layout: _Layout | None = None  # of the last message a plan built
        #: Models with a request filed as a response-cache replay (see ``replays``).
        self.replayed: set[str] = set()

    def __len__(self) -> int:
        return len(self._plans)

    def decode(self, data: bytes | memoryview) -> InferRequest:
        """The core request of one serialised ``ModelInferRequest``, the same as
        ``decode_infer_request(ModelInferRequest.FromString(data))`` gives (which is
        what happens when no plan applies). Raises protobuf's ``DecodeError`` for
        malformed bytes and core errors for invalid requests."""
        view = memoryview(data)
        layout = self._layout
        if layout is not None:
            split = layout.split(view)
            if split is not None:
                request = layout.plan.build(*split)
                if request is not None:
                    return request
        fields = _fields(view)
        if fields is None or (scanned := _split(view, fields)) is None:
            return decode_infer_request(_ModelInferRequest.FromString(data))
        key, request_id, raws = scanned
        plans = self._plans
        if key in plans:
            plan = plans[key]
            if plan is not None:
                request = plan.build(request_id, raws)
                if request is not None:
                    self._layout = _Layout.of(view, fields, plan)
                    return request
            return _decode_message(data, view, fields, raws)
        request = _decode_message(data, view, fields, raws)
        plans[key] = _plan_for(request, len(raws))
        if len(plans) > self._limit:
            plans.popitem(last=False)
        return request
