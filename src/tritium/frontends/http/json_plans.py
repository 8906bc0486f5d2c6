"""Exact reuse of decoded JSON infer bodies whose only changing part is their tensor data.

A client posting JSON tensors sends the same text again and again but for the numbers
inside each input's ``"data": [...]``. The first such body is decoded the slow way; its
text around those arrays (the gaps) is then kept with the decoded request's settings. A
later body that has the same gaps around arrays of its own is decoded from the plan: each
array's text is parsed on its own and converted by the same function the slow path uses,
and everything else — names, types, shapes, outputs, parameters, id — comes from the plan,
checked once when it was made.

Why that is exact: the plan's gaps are the verbatim text of a document that parsed, and a
piece of text that parses as one JSON array on its own ends at its own closing bracket, so
gaps and arrays put back together parse as the plan's document with the new arrays in the
data fields. A body that does not fit (a gap differs, a piece is not one array, a count or
type is wrong) is decoded the slow way, which words any error.

Only inputs of numeric and boolean types in JSON-only bodies (no binary data, no shared
memory, no classification) are planned; the cache is a small bounded LRU keyed by the text
before the first array.
"""

from __future__ import annotations

import re
from collections import OrderedDict
from dataclasses import dataclass

import orjson

from tritium.core import datatypes
from tritium.core.types import InferRequest, InputTensor, Parameters, RequestSettings
from tritium.frontends.http.json_slices import find_spans, skeleton
from tritium.frontends.http.json_tensors import decode_json_data

MAX_PLANS = 64
# The first data key's array (see ``json_slices.find_spans``).
_DATA_KEY = re.compile(rb'"data"[ \t\n\r]*:[ \t\n\r]*\[')
#: Bodies at most this big are planned (the text is kept).
MAX_BODY = 16 * 1024


@dataclass(frozen=True, slots=True)
class JsonInput:
    name: str
    datatype: str
    shape: tuple[int, ...]
    count: int
    parameters: Parameters


@dataclass(frozen=True, slots=True, eq=False)  # identity hash: the plan is the layout key
class JsonPlan:
    request_id: str
    settings: RequestSettings
    inputs: tuple[JsonInput, ...]
    #: Text before the first array, between consecutive arrays, after the last one.
    gaps: tuple[bytes, ...]
    prefs: object  # OutputPrefs, shared read-only by every request made from the plan

    def decode(self, model_name: str, model_version: str, body: bytes) -> InferRequest | None:
        """A request from ``body`` (whose text starts with ``gaps[0]``), or None when
        the body does not fit the plan."""
        gaps = self.gaps
        last = len(gaps) - 1
        pos = len(gaps[0])
        tensors = []
        for k, spec in enumerate(self.inputs):
            after = gaps[k + 1]
            if k + 1 < last:
                stop = body.find(after, pos)
                if stop < 0:
                    return None
            else:
                stop = len(body) - len(after)
                if stop <= pos or not body.endswith(after):
                    return None
            try:
                values = orjson.loads(body[pos:stop])
            except orjson.JSONDecodeError:
                return None
            if type(values) is not list:
                return None
            data = decode_json_data(
                spec.name, model_name, spec.datatype, spec.shape, spec.count, values
            )
            params = spec.parameters
            tensors.append(
                InputTensor(
                    spec.name, spec.datatype, spec.shape, data, dict(params) if params else {}
                )
            )
            pos = stop + len(after)
        request = InferRequest(model_name, model_version, self.request_id)
        request.layout_key = self  # the exact text identifies the layout: validation reused
        self.settings.apply(request)
        request.inputs = tensors
        return request


def json_plan_from(body: bytes, request: InferRequest, prefs: object) -> JsonPlan | None:
    """The plan of a JSON-only ``body`` just decoded the slow way into ``request``, or
    None when it cannot have one."""
    inputs = request.inputs
    if len(body) > MAX_BODY or not inputs or request.shared_memory:
        return None
    for tensor in inputs:
        if tensor.datatype == "BYTES" or not datatypes.is_valid(tensor.datatype):
            return None
    spans = find_spans(body, len(body))
    if len(spans) != len(inputs):
        return None
    # Each array found must be the data of the input in its place, and nothing else:
    # with every array replaced by a placeholder, the inputs' data are the placeholders
    # in order.
    text, marks = skeleton(body, len(body), spans)
    doc = orjson.loads(text)
    docs = doc.get("inputs") if type(doc) is dict else None
    if type(docs) is not list or len(docs) != len(inputs):
        return None
    if [entry.get("data") if type(entry) is dict else None for entry in docs] != marks:
        return None
    gaps = [body[: spans[0].start]]
    for before, after in zip(spans, spans[1:]):
        gaps.append(body[before.end + 1 : after.start])
    gaps.append(body[spans[-1].end + 1 :])
    if any(not gap for gap in gaps[1:-1]):
        return None
    return JsonPlan(
        request.id,
        RequestSettings.of(request),
        tuple(
            JsonInput(
                t.name,
                t.datatype,
                t.shape,
                datatypes.element_count(t.shape),
                dict(t.parameters),
            )
            for t in inputs
        ),
        tuple(gaps),
        prefs,
    )


class JsonPlans:
    def __init__(self, limit: int = MAX_PLANS) -> None:
        self._plans: OrderedDict[bytes, JsonPlan] = OrderedDict()
        self._limit = limit

    def __len__(self) -> int:
        return len(self._plans)

    def find(self, body: bytes) -> JsonPlan | None:
        """The plan whose text before the first data array is ``body``'s."""
        if not self._plans or len(body) > MAX_BODY:
            return None
        match = _DATA_KEY.search(body)
        if match is None:
            return None
        plan = self._plans.get(body[: match.end() - 1])
        if plan is not None:
            self._plans.move_to_end(plan.gaps[0])
        return plan

    def put(self, plan: JsonPlan) -> None:
        self._plans[plan.gaps[0]] = plan
        if len(self._plans) > self._limit:
            self._plans.popitem(last=False)
