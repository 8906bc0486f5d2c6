"""Transport-neutral inference request and response objects.

Both frontends decode into these and encode from them; the service, the schedulers and
the worker channel never see HTTP or gRPC. Tensor data is a numpy array (object array of
``bytes`` for BYTES, ``uint16`` storage for BF16), normally a view over the bytes the
frontend received, so nothing is copied until it is written into a worker's arena. BYTES
that arrived serialized (binary data, raw contents, shared memory, a worker's outputs) stay
so as a :class:`~tritium.core.datatypes.PackedBytes`, which answers like an object array.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol

import numpy as np

from tritium.core.errors import TritiumError

Parameters = dict[str, Any]


@dataclass(slots=True)
class InputTensor:
    name: str
    datatype: str
    shape: tuple[int, ...]
    data: np.ndarray
    parameters: Parameters = field(default_factory=dict)


@dataclass(slots=True)
class RequestedOutput:
    name: str
    parameters: Parameters = field(default_factory=dict)


@dataclass(slots=True)
class OutputTensor:
    name: str
    datatype: str
    shape: tuple[int, ...]
    data: np.ndarray
    parameters: Parameters = field(default_factory=dict)
    # Set by the service once ``data`` was written into the client's shared-memory
    # region: frontends then send the output's metadata without its data.
    shared_memory: bool = False


@dataclass(slots=True)
class InferRequest:
    """One inference request as the service sees it.

    ``outputs`` is None when the client did not name any (all outputs are returned).
    ``model_version`` is "" for the default version per the model's version policy.
    """

    model_name: str
    model_version: str = ""
    id: str = ""
    inputs: list[InputTensor] = field(default_factory=list)
    outputs: list[RequestedOutput] | None = None
    parameters: Parameters = field(default_factory=dict)
    correlation_id: int | str = 0
    flags: int = 0
    priority: int = 0
    timeout_us: int = 0
    # Filled by the service once the request is accepted.
    arrival_ns: int = 0
    dispatch_ns: int = 0  # when an instance started it (queue time = dispatch - arrival)
    # (input, infer, output) ns the worker measured for the batch that ran this request,
    # stamped by its instance when the batch finished (None until then, or if it failed).
    compute_ns: tuple[int, int, int] | None = None
    batch_size: int = 1
    # Set by a frontend when an immutable, hashable object identifies this request's exact
    # tensor layout (names, types, shapes, requested outputs, id): validation results
    # are then reused for identical requests.
    layout_key: object = None
    # Set by a frontend when an input or requested output names a shared-memory region
    # (parameter ``shared_memory_region``); the service then resolves the regions. Requests
    # without it pay nothing for the shared-memory extension.
    shared_memory: bool = False
    # Set by a frontend when a requested output asks for classification (Triton's
    # classification extension): output name -> number of classes. The service then
    # replaces those outputs by their top classes; other requests pay nothing for it.
    classification: dict[str, int] | None = None
    # Set by the service for a model with the decoupled transaction policy: gets each
    # response as the model sends it, ``on_response(response | None, final)``.
    responses: Any = None
    # ``triton_enable_empty_final_response``: a stream marks the end of a decoupled
    # request's responses with an empty response even when the model sent none with it.
    empty_final: bool = False
    # The W3C trace context the client sent (``traceparent``, and ``tracestate`` when
    # given): in OpenTelemetry trace mode such a request is traced, under the client's span.
    trace_context: dict[str, str] | None = None
    # True for an ensemble's step (a subclass): its worker may read inputs in place from
    # another worker's shared arena (those flagged in ``movable_inputs``, by position:
    # read by this step alone) and keep its outputs in one.
    ensemble_step: ClassVar[bool] = False
    movable_inputs: ClassVar[tuple[bool, ...]] = ()


class EncodedForms(Protocol):
    """Where a frontend keeps the encoded bytes of a response it will send again: the
    response cache's entry behind a hit. Keys are the frontend's own (protocol, requested
    outputs, encoding options); the values are opaque to everyone else."""

    def encoded(self, key: Hashable) -> Any:
        """The value kept under ``key``, else None."""
        ...

    def keep_encoded(self, key: Hashable, value: Any, nbytes: int) -> bool:
        """Keep ``value`` (``nbytes`` bytes, counted against the cache's size) under
        ``key``; False when it is not kept (no room, or the entry is gone)."""
        ...

    def keep_replay(self, replay: Hashable, form: Hashable, nbytes: int) -> bool:
        """File ``replay``, the frontend's key for a whole request (``nbytes`` bytes,
        counted against the cache's size), as answered by the value kept under ``form``:
        the service then answers the same bytes with that value (``replay``) without
        decoding them. False when it is not filed."""
        ...


@dataclass(slots=True)
class InferResponse:
    model_name: str
    model_version: str
    id: str = ""
    outputs: list[OutputTensor] = field(default_factory=list)
    parameters: Parameters = field(default_factory=dict)
    error: TritiumError | None = None
    # Set by the response cache on a hit whose outputs are the entry's (no shared memory,
    # no classification): a frontend encodes such a response once per form and reuses
    # the bytes for the next hits, splicing in only the id.
    encoded_forms: EncodedForms | None = None


@dataclass(frozen=True, slots=True)
class RequestSettings:
    """Everything of a decoded request but its model, id and tensors.

    The frontends' plan caches keep these for a request header they have decoded once, and
    give them to each new request with the same header.
    """

    correlation_id: int | str
    flags: int
    priority: int
    timeout_us: int
    parameters: Parameters
    outputs: tuple[tuple[str, Parameters], ...] | None
    shared_memory: bool
    empty_final: bool = False

    @classmethod
    def of(cls, request: InferRequest) -> RequestSettings:
        outputs = (
            None
            if request.outputs is None
            else tuple((o.name, dict(o.parameters)) for o in request.outputs)
        )
        return cls(
            request.correlation_id,
            request.flags,
            request.priority,
            request.timeout_us,
            dict(request.parameters),
            outputs,
            request.shared_memory,
            request.empty_final,
        )

    def apply(self, request: InferRequest) -> None:
        """Give ``request`` these settings, in fresh dicts (the service may annotate them)."""
        request.correlation_id = self.correlation_id
        request.flags = self.flags
        request.priority = self.priority
        request.timeout_us = self.timeout_us
        request.shared_memory = self.shared_memory
        request.empty_final = self.empty_final
        if self.parameters:
            request.parameters = dict(self.parameters)
        if self.outputs is not None:
            request.outputs = [RequestedOutput(name, dict(p)) for name, p in self.outputs]
