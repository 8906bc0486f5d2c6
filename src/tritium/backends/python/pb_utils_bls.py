"""BLS for model code: ``InferenceRequest.exec`` / ``async_exec`` and model management
(``is_model_ready``, ``load_model``, ``unload_model``), over the worker's call channel.

Errors of the called model, of the request (unknown model, bad input) and timeouts come
back as an ``InferenceResponse`` whose ``has_error()`` is true, as in Triton; misuse of
the API raises ``TritonModelException``.

``exec(decoupled=True)`` returns a :class:`ResponseIterator` over the called model's
responses, as Triton's does: each response the model sent, in order; the last one is the
model's final response, or an empty one (no outputs) when the model sent the final flag
alone. A model that is not decoupled gives its one response. Errors (of a response, of the
call, a timeout) are error responses; after one that ends the call, iteration stops.
``await async_exec(decoupled=True)`` gives the same iterator once the first response is
in; it also iterates with ``async for`` without blocking the event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from tritium.backends.python import bls
from tritium.backends.python.bls_streams import ReplyStream
from tritium.backends.python.pb_utils_errors import ErrorCode, TritonError, TritonModelException
from tritium.backends.python.pb_utils_response import InferenceResponse
from tritium.backends.python.pb_utils_tensor import Tensor
from tritium.ipc.messages import Call, InferCall, LoadModelCall, ModelReadyCall, UnloadModelCall


def _response(answer: bls.Answer) -> InferenceResponse:
    outputs = [
        Tensor._from_buffer(name, array, datatype) for name, datatype, array in answer.tensors
    ]
    params = answer.message.params or None
    return InferenceResponse(output_tensors=outputs, parameters=params)


def _error_response(error: bls.CallError) -> InferenceResponse:
    code = ErrorCode.__members__.get(error.code, ErrorCode.INTERNAL)
    return InferenceResponse(error=TritonError(error.message, code))


class ResponseIterator:
    """The responses of one ``exec(decoupled=True)`` call, as Triton's ``ResponseIterator``.

    Iterate it once, with ``for`` or ``async for``. ``cancel()`` asks the server to cancel
    the call (the called model sees ``is_cancelled()``); iteration then ends with the
    responses already on their way and a final error. Dropping an iterator before its
    last response cancels the call too, so an abandoned call does not run on unread.
    """

    __slots__ = ("_stream", "_finished", "__weakref__")

    def __init__(self, stream: ReplyStream) -> None:
        self._stream = stream
        self._finished = False

    def __iter__(self) -> ResponseIterator:
        return self

    def __next__(self) -> InferenceResponse:
        if self._finished:
            raise StopIteration
        item, final = self._stream.take(bls.NO_ANSWER_S)
        self._finished = final
        return _to_response(item)

    def __aiter__(self) -> ResponseIterator:
        return self

    async def __anext__(self) -> InferenceResponse:
        if self._finished:
            raise StopAsyncIteration
        item, final = await self._stream.take_async()
        self._finished = final
        return _to_response(item)

    def cancel(self) -> None:
        """Cancel the call on the server (Triton's ``ResponseIterator.cancel``)."""
        if not self._finished:
            self._stream.cancel()

    def __del__(self) -> None:
        if not self._finished:
            with contextlib.suppress(Exception):  # e.g. at interpreter exit
                self._stream.drop()


def _to_response(item: bls.Answer | bls.CallError) -> InferenceResponse:
    if isinstance(item, bls.CallError):
        return _error_response(item)
    return _response(item)


def _start_stream(message: InferCall, tensors: list[Any]) -> ResponseIterator:
    message.decoupled = True
    try:
        client = bls.client()
    except bls.CallError as exc:
        return ResponseIterator(_failed(ReplyStream(None), exc))  # type: ignore[arg-type]
    stream = ReplyStream(client)
    sent = client.start(message, tensors, stream=stream)
    if sent.done() and sent.exception() is not None:
        _failed(stream, sent.exception())  # type: ignore[arg-type]
    return ResponseIterator(stream)


def _failed(stream: ReplyStream, error: bls.CallError) -> ReplyStream:
    """A stream that never reached the server: its one answer is the error."""
    stream.deliver(error, True)
    stream.closed = True  # nothing to cancel
    return stream


def exec_request(message: InferCall, tensors: list[Any], decoupled: bool = False) -> Any:
    """``InferenceRequest.exec`` of the call ``message`` with its input ``tensors``: the
    response, or with ``decoupled`` a :class:`ResponseIterator` of the responses."""
    if decoupled:
        return _start_stream(message, tensors)
    try:
        return _response(bls.client().call(message, tensors))
    except bls.CallError as exc:
        return _error_response(exc)


async def _await_answer(future: asyncio.Future) -> InferenceResponse:
    try:
        return _response(await future)
    except bls.CallError as exc:
        return _error_response(exc)


async def _first_response(iterator: ResponseIterator) -> ResponseIterator:
    await iterator._stream.wait_async()
    return iterator


def async_exec_request(message: InferCall, tensors: list[Any], decoupled: bool = False) -> Any:
    """An awaitable of the response (with ``decoupled``, of a :class:`ResponseIterator`,
    once the first response is in), sent at once so several run side by side."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        raise TritonModelException(
            "async_exec() must be awaited in a running event loop (async def execute)"
        ) from None
    if decoupled:
        return asyncio.ensure_future(_first_response(_start_stream(message, tensors)))
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


def _manage(message: Call) -> Any:
    try:
        return bls.client().call(message).message.value
    except bls.CallError as exc:
        raise TritonModelException(exc.message) from None


def is_model_ready(model_name: str, model_version: str = "") -> bool:
    """Whether the server has ``model_name`` (at ``model_version``, "" = latest) ready."""
    name = _text(model_name, "model_name")
    version = _text(model_version, "model_version")
    return bool(_manage(ModelReadyCall(name, version)))


def load_model(model_name: str, config: str = "", files: dict[str, bytes] | None = None) -> None:
    """Load (or reload) ``model_name`` from the repository (explicit model control)."""
    if files:
        raise TritonModelException("load_model(files=...) is not supported yet")
    _manage(LoadModelCall(_text(model_name, "model_name"), config or ""))


def unload_model(model_name: str, unload_dependents: bool = False) -> None:
    """Unload ``model_name`` (explicit model control)."""
    _manage(UnloadModelCall(_text(model_name, "model_name"), bool(unload_dependents)))
