"""BLS for model code: ``InferenceRequest.exec`` / ``async_exec`` and model management
(``is_model_ready``, ``load_model``, ``unload_model``), over the worker's call channel.

Errors of the called model, of the request (unknown model, bad input) and timeouts come
back as an ``InferenceResponse`` whose ``has_error()`` is true, as in Triton; misuse of
the API raises ``TritonModelException``.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from tritium.backends.python import bls
from tritium.backends.python.pb_utils_errors import ErrorCode, TritonError, TritonModelException
from tritium.backends.python.pb_utils_tensor import Tensor

if TYPE_CHECKING:
    from tritium.backends.python.pb_utils_messages import InferenceRequest, InferenceResponse


def _request_message(request: InferenceRequest) -> tuple[dict[str, Any], list[Any]]:
    version = request._model_version
    message = {
        "op": "infer",
        "model": request._model_name,
        "version": "" if int(version) < 0 else str(version),
        "outputs": sorted(request._requested_output_names),
        "rid": request._request_id,
        "corr": request._correlation_id,
        "flags": request._flags,
        "timeout": request._timeout,
        "params": request._parameters,
    }
    tensors = [(t._name, t._datatype, t._array) for t in request._inputs]
    return message, tensors


def _response(answer: bls.Answer) -> InferenceResponse:
    from tritium.backends.python.pb_utils_messages import InferenceResponse

    outputs = [
        Tensor._from_buffer(name, array, datatype) for name, datatype, array in answer.tensors
    ]
    params = answer.message.get("params") or None
    return InferenceResponse(output_tensors=outputs, parameters=params)


def _error_response(error: bls.CallError) -> InferenceResponse:
    from tritium.backends.python.pb_utils_messages import InferenceResponse

    code = ErrorCode.__members__.get(error.code, ErrorCode.INTERNAL)
    return InferenceResponse(error=TritonError(error.message, code))


def exec_request(request: InferenceRequest, decoupled: bool = False) -> InferenceResponse:
    if decoupled:
        raise TritonModelException(
            "exec(decoupled=True) needs decoupled models, which are not supported yet"
        )
    message, tensors = _request_message(request)
    try:
        return _response(bls.client().call(message, tensors))
    except bls.CallError as exc:
        return _error_response(exc)


async def _await_answer(future: asyncio.Future) -> InferenceResponse:
    try:
        return _response(await future)
    except bls.CallError as exc:
        return _error_response(exc)


def async_exec_request(request: InferenceRequest, decoupled: bool = False) -> Any:
    """An awaitable of the response, sent at once (so several run side by side)."""
    if decoupled:
        raise TritonModelException(
            "async_exec(decoupled=True) needs decoupled models, which are not supported yet"
        )
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        raise TritonModelException(
            "async_exec() must be awaited in a running event loop (async def execute)"
        ) from None
    message, tensors = _request_message(request)
    try:
        future = bls.client().start_async(message, tensors)
    except bls.CallError as exc:
        done = asyncio.get_running_loop().create_future()
        done.set_exception(exc)
        future = done
    return asyncio.ensure_future(_await_answer(future))


def _text(value: Any, what: str) -> str:
    if isinstance(value, bytes):
        return value.decode("utf-8")
    if not isinstance(value, str):
        raise TritonModelException(f"{what} must be a str, got {type(value)}")
    return value


def _manage(message: dict[str, Any]) -> Any:
    try:
        return bls.client().call(message).message.get("value")
    except bls.CallError as exc:
        raise TritonModelException(exc.message) from None


def is_model_ready(model_name: str, model_version: str = "") -> bool:
    """Whether the server has ``model_name`` (at ``model_version``, "" = latest) ready."""
    name = _text(model_name, "model_name")
    version = _text(model_version, "model_version")
    return bool(_manage({"op": "ready", "model": name, "version": version}))


def load_model(model_name: str, config: str = "", files: dict[str, bytes] | None = None) -> None:
    """Load (or reload) ``model_name`` from the repository (explicit model control)."""
    if files:
        raise TritonModelException("load_model(files=...) is not supported yet")
    _manage({"op": "load", "model": _text(model_name, "model_name"), "config": config or ""})


def unload_model(model_name: str, unload_dependents: bool = False) -> None:
    """Unload ``model_name`` (explicit model control)."""
    _manage(
        {
            "op": "unload",
            "model": _text(model_name, "model_name"),
            "unload_dependents": bool(unload_dependents),
        }
    )
