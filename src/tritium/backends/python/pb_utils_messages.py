"""``InferenceRequest`` and ``InferenceResponse`` as model code sees them.

Constructor signatures, accessors, parameter rules and error texts follow Triton's Python
backend. Requests the server hands to ``execute`` are built by the worker through
:meth:`InferenceRequest._from_server`; cancellation state stays with the worker, which
passes a callable, and so does the response sender of a decoupled model's requests.
``exec``/``async_exec`` (BLS, ``decoupled=True`` included) are in ``pb_utils_bls``, the
response type in ``pb_utils_response``. Features not supported here yet (request
rescheduling) raise ``TritonModelException`` saying so.
"""

from __future__ import annotations

import enum
import json
from collections.abc import Callable, Iterable
from typing import Any

from tritium.backends.python.pb_utils_bls import async_exec_request, exec_request
from tritium.backends.python.pb_utils_errors import TritonModelException
from tritium.backends.python.pb_utils_response import (
    InferenceResponse,
    _check_tensors,
    parameters_to_json,
)
from tritium.backends.python.pb_utils_tensor import Tensor
from tritium.ipc.messages import InferCall

__all__ = ["InferenceRequest", "InferenceResponse", "parameters_to_json"]

_REQUIRED: Any = object()

TRITONSERVER_REQUEST_RELEASE_ALL = 1
TRITONSERVER_REQUEST_RELEASE_RESCHEDULE = 2


class MemoryType(enum.IntEnum):
    """Triton's ``MemoryType`` enum, exported as ``TRITONSERVER_MEMORY_GPU`` / ``_CPU``."""

    TRITONSERVER_MEMORY_GPU = 0
    TRITONSERVER_MEMORY_CPU = 1


class PreferredMemory:
    """Where a BLS caller would like outputs placed (kept for API compatibility)."""

    __slots__ = ("preferred_memory_type", "preferred_device_id")

    def __init__(
        self, preferred_memory_type: MemoryType | int, preferred_device_id: int = 0
    ) -> None:
        self.preferred_memory_type = MemoryType(preferred_memory_type)
        self.preferred_device_id = int(preferred_device_id)


class InferenceTrace:
    """A request's trace handle; tracing is not collected, so there is no context."""

    __slots__ = ()

    def get_context(self) -> str | None:
        return None


# Tracing is not collected, so every received request can share one stateless handle.
_NO_TRACE = InferenceTrace()


class InferenceRequest:
    """An inference request: the ones ``execute`` receives, or one a model builds.

    ``InferenceRequest(request_id="", correlation_id=0, inputs, requested_output_names,
    model_name, model_version=-1, flags=0, timeout=0, preferred_memory=None, trace=None,
    parameters=None)`` — Triton's order; ``inputs``, ``requested_output_names`` and
    ``model_name`` are required.
    """

    __slots__ = (
        "_request_id",
        "_correlation_id",
        "_inputs",
        "_requested_output_names",
        "_model_name",
        "_model_version",
        "_flags",
        "_timeout",
        "_preferred_memory",
        "_trace",
        "_parameters",
        "_is_cancelled",
        "_release_flags",
        "_response_sender",
    )

    def __init__(
        self,
        request_id: str = "",
        correlation_id: int | str = 0,
        inputs: list[Tensor] = _REQUIRED,
        requested_output_names: list[str] = _REQUIRED,
        model_name: str = _REQUIRED,
        model_version: int = -1,
        flags: int = 0,
        timeout: int = 0,
        preferred_memory: PreferredMemory | None = None,
        trace: InferenceTrace | None = None,
        parameters: dict[str, bool | int | str] | None = None,
    ) -> None:
        missing = [
            name
            for name, value in (
                ("inputs", inputs),
                ("requested_output_names", requested_output_names),
                ("model_name", model_name),
            )
            if value is _REQUIRED
        ]
        if missing:
            raise TypeError(
                f"InferenceRequest() missing required argument(s): {', '.join(missing)}"
            )
        if isinstance(correlation_id, bool) or not isinstance(correlation_id, (int, str)):
            raise TritonModelException("Correlation ID must be integer or string")
        # Names read from a BYTES tensor arrive as bytes; Triton takes them as text.
        if isinstance(model_name, bytes):
            model_name = model_name.decode("utf-8")
        if not isinstance(model_name, str):
            raise TypeError(f"model_name must be a str, got {type(model_name)}")
        names = [n.decode("utf-8") if isinstance(n, bytes) else n for n in requested_output_names]
        for name in names:
            if not isinstance(name, str):
                raise TypeError(f"requested_output_names must be strings, got {type(name)}")
        self._request_id = str(request_id)
        self._correlation_id = correlation_id
        self._inputs = _check_tensors(inputs, "inputs")
        self._requested_output_names = set(names)
        self._model_name = model_name
        # An int here; the version string the server gave for requests it hands in.
        self._model_version: int | str = int(model_version)
        self._flags = int(flags)
        self._timeout = int(timeout)
        self._preferred_memory = preferred_memory
        self._trace = trace if trace is not None else InferenceTrace()
        self._parameters = parameters_to_json(parameters)
        self._is_cancelled: Callable[[], bool] | None = None
        self._release_flags = TRITONSERVER_REQUEST_RELEASE_ALL
        self._response_sender: Any = None

    @classmethod
    def _from_server(
        cls,
        *,
        inputs: list[Tensor],
        requested_output_names: Iterable[str],
        model_name: str,
        model_version: int = -1,
        request_id: str = "",
        correlation_id: int | str = 0,
        flags: int = 0,
        timeout: int = 0,
        parameters: dict[str, Any] | str | None = None,
        is_cancelled: Callable[[], bool] | None = None,
    ) -> InferenceRequest:
        """Build a request the worker received, trusting its (already validated) parts.

        ``inputs`` are ready Tensors (see ``Tensor._from_buffer``); ``parameters`` is the
        request's parameter dict (written as compact JSON, like Triton) or a JSON string
        used as is; ``timeout`` is in microseconds; ``is_cancelled`` answers
        ``is_cancelled()`` and is owned by the worker.
        """
        if isinstance(parameters, str):
            params_json = parameters
        elif parameters:
            params_json = json.dumps(parameters, separators=(",", ":"))
        else:
            params_json = "{}"
        return cls._received(
            inputs,
            set(requested_output_names),
            model_name,
            model_version,
            request_id,
            correlation_id,
            flags,
            timeout,
            params_json,
            is_cancelled,
        )

    @classmethod
    def _received(
        cls,
        inputs: list[Tensor],
        requested_output_names: set[str],
        model_name: str,
        model_version: int | str,
        request_id: str,
        correlation_id: int | str,
        flags: int,
        timeout: int,
        parameters_json: str,
        is_cancelled: Callable[[], bool] | None,
    ) -> InferenceRequest:
        """:meth:`_from_server` with every part final and positional: the worker's
        per-request path. ``requested_output_names`` is a fresh set the request owns."""
        request = cls.__new__(cls)
        request._request_id = request_id
        request._correlation_id = correlation_id
        request._inputs = inputs
        request._requested_output_names = requested_output_names
        request._model_name = model_name
        request._model_version = model_version
        request._flags = flags
        request._timeout = timeout
        request._preferred_memory = None
        request._trace = _NO_TRACE
        request._parameters = parameters_json
        request._is_cancelled = is_cancelled
        request._release_flags = TRITONSERVER_REQUEST_RELEASE_ALL
        request._response_sender = None
        return request

    def inputs(self) -> list[Tensor]:
        return self._inputs

    def request_id(self) -> str:
        return self._request_id

    def correlation_id(self) -> int | str:
        return self._correlation_id

    def flags(self) -> int:
        return self._flags

    def set_flags(self, flags: int) -> None:
        self._flags = int(flags)

    def timeout(self) -> int:
        """The request's timeout in microseconds (0 when none was given)."""
        return self._timeout

    def parameters(self) -> str:
        """The request's parameters as a JSON object string."""
        return self._parameters

    def requested_output_names(self) -> set[str]:
        return self._requested_output_names

    def model_name(self) -> str:
        return self._model_name

    def trace(self) -> InferenceTrace:
        return self._trace

    def is_cancelled(self) -> bool:
        return self._is_cancelled() if self._is_cancelled is not None else False

    def get_response_sender(self) -> Any:
        """The request's ``InferenceResponseSender`` (decoupled models)."""
        sender = self._response_sender
        if sender is None:
            raise TritonModelException(
                "get_response_sender() is only available to models using the decoupled "
                "transaction policy; return a list of InferenceResponse objects from "
                "execute() instead"
            )
        return sender

    def set_release_flags(self, flags: int) -> None:
        if flags & TRITONSERVER_REQUEST_RELEASE_RESCHEDULE:
            raise TritonModelException("request rescheduling is not supported yet")
        self._release_flags = int(flags)

    def exec(self, decoupled: bool = False) -> Any:
        """Run this request on the server (BLS) and return its ``InferenceResponse``.

        With ``decoupled=True``, a ``ResponseIterator`` over the model's responses (the
        last one final, empty when the model sent the final flag alone); a decoupled model
        needs it, as in Triton.
        """
        return exec_request(*self._call_message(), decoupled)

    def async_exec(self, decoupled: bool = False) -> Any:
        """Send this request now; await the result for its ``InferenceResponse`` (with
        ``decoupled=True``, its ``ResponseIterator`` once the first response is in,
        which ``async for`` iterates without blocking the event loop)."""
        return async_exec_request(*self._call_message(), decoupled)

    def _call_message(self) -> tuple[InferCall, list[Any]]:
        """This request as a BLS call: the call and its input tensors."""
        version = self._model_version
        message = InferCall(
            model=self._model_name,
            version="" if int(version) < 0 else str(version),
            outputs=sorted(self._requested_output_names),
            rid=self._request_id,
            corr=self._correlation_id,
            flags=self._flags,
            timeout=self._timeout,
            params=self._parameters,
        )
        return message, [(t._name, t._datatype, t._array) for t in self._inputs]

    def __repr__(self) -> str:
        return (
            f"InferenceRequest(model_name={self._model_name!r}, request_id={self._request_id!r}, "
            f"inputs={[t.name() for t in self._inputs]})"
        )
