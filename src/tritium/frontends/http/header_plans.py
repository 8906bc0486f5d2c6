"""Exact reuse of decoded infer headers whose tensors all travel as binary data.

Clients send the same JSON header again and again (same names, types, shapes and options;
only the binary data changes, and perhaps a leading ``id``), so the decoded form of a
header is kept, keyed by the header's exact bytes (less a leading plain ``id`` member,
which the decoder puts back into each request). A hit skips JSON parsing and every header check (they were passed
when the plan was made) and rebuilds fresh request objects; only the binary data is read
anew. Inputs and outputs in shared-memory regions are planned too (the service reads and
checks the regions for every request). Headers with JSON data or classification are never
cached.
The cache is a small bounded LRU.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

import numpy as np

from tritium.core import datatypes
from tritium.core.types import InferRequest, InputTensor, Parameters, RequestSettings

MAX_PLANS = 256
MAX_HEADER = 16 * 1024
#: ``sizes`` entry of an input whose data lives in a shared-memory region.
SHM_INPUT = -1
# Placeholder data of inputs in shared memory (the service fills them from the region).
_NO_DATA = np.empty(0, dtype=np.uint8)
_NO_DATA.flags.writeable = False


@dataclass(frozen=True, slots=True)
class InputPlan:
    name: str
    datatype: str
    shape: tuple[int, ...]
    count: int
    size: int
    parameters: Parameters
    dtype: np.dtype | None  # None for BYTES, whose content must be checked every time
    shm: bool = False  # the data is in a shared-memory region named by ``parameters``


@dataclass(frozen=True, slots=True, eq=False)  # identity hash: the plan is the layout key
class HeaderPlan:
    request_id: str
    settings: RequestSettings
    inputs: tuple[InputPlan, ...]
    binary_total: int
    prefs: object  # OutputPrefs, shared read-only by every request made from the plan

    def request(self, model_name: str, model_version: str) -> InferRequest:
        request = InferRequest(model_name, model_version, self.request_id)
        # The exact header identifies the tensor layout, so validation can be reused.
        request.layout_key = self
        self.settings.apply(request)
        return request


class HeaderPlans:
    def __init__(self, limit: int = MAX_PLANS) -> None:
        self._plans: OrderedDict[bytes, HeaderPlan] = OrderedDict()
        self._limit = limit
        # Whether a plan for a body without binary data (every input in shared memory) was
        # ever made: until then JSON-only bodies, which are mostly JSON data, skip the lookup.
        self.json_only = False

    def get(self, header: bytes) -> HeaderPlan | None:
        plan = self._plans.get(header)
        if plan is not None:
            self._plans.move_to_end(header)
        return plan

    def put(self, header: bytes, plan: HeaderPlan) -> None:
        if not plan.binary_total:
            self.json_only = True
        self._plans[header] = plan
        if len(self._plans) > self._limit:
            self._plans.popitem(last=False)

    def __len__(self) -> int:
        return len(self._plans)


def plan_from(
    request: InferRequest,
    sizes: list[int],
    counts: list[int],
    prefs: object,
    request_id: str | None = None,
) -> HeaderPlan:
    """The plan of a request that was just decoded the slow way (every input binary or
    in shared memory: ``sizes`` holds its byte size, or ``SHM_INPUT``). ``request_id``
    replaces the request's id in the plan: "" for a plan keyed by a header without its id."""
    inputs = tuple(
        InputPlan(
            t.name,
            t.datatype,
            t.shape,
            count,
            max(size, 0),
            dict(t.parameters),
            None if t.datatype == "BYTES" else datatypes.raw_dtype(t.datatype),
            size == SHM_INPUT,
        )
        for t, size, count in zip(request.inputs, sizes, counts)
    )
    return HeaderPlan(
        request.id if request_id is None else request_id,
        RequestSettings.of(request),
        inputs,
        sum(size for size in sizes if size > 0),
        prefs,
    )


def inputs_from(plan: HeaderPlan, model: str, body: memoryview, offset: int) -> list[InputTensor]:
    """Fresh input tensors over ``body``'s binary data, laid out as the plan says."""
    tensors = []
    for spec in plan.inputs:
        if spec.shm:
            tensors.append(
                InputTensor(spec.name, spec.datatype, spec.shape, _NO_DATA, dict(spec.parameters))
            )
            continue
        chunk = body[offset : offset + spec.size]
        offset += spec.size
        if spec.dtype is None:
            data = datatypes.tensor_from_bytes(
                spec.name, model, spec.datatype, spec.shape, spec.count, chunk
            )
        else:
            # Sizes were checked when the plan was made and the total is checked per hit.
            data = np.frombuffer(chunk, dtype=spec.dtype, count=spec.count)
            if len(spec.shape) != 1:
                data = data.reshape(spec.shape)
        params = spec.parameters
        tensors.append(
            InputTensor(spec.name, spec.datatype, spec.shape, data, dict(params) if params else {})
        )
    return tensors
