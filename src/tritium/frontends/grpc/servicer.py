"""grpc.aio handlers for the transport-neutral method table in ``calls``.

Every :class:`~tritium.frontends.grpc.calls.Method` becomes one grpc.aio method handler:
grpcio decodes the request with the method's message class, the handler calls the
:class:`ServiceApi` through the table and errors are mapped once, by ``call_status``, to
``context.abort``. No method logic lives here, so this transport and the native one
answer alike by construction. With ``--log-verbose`` at start-up, each call's method and
status is logged in the native transport's words (``GRPC call: ModelInfer: status 0 (OK)``).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable
from typing import Any, NoReturn

import grpc

from tritium.core.trace_context import TRACEPARENT, propagated
from tritium.frontends.grpc.calls import METHODS, STREAM, Method
from tritium.frontends.grpc.infer_calls import StreamBacklogExceeded, call_status
from tritium.frontends.grpc.open_streams import OpenStreams, StreamEndedAtShutdown
from tritium.frontends.restricted import RestrictedApis, Restriction, grpc_method_group
from tritium.service.api import ServiceApi

logger = logging.getLogger("tritium.frontends.grpc")

_STATUS_BY_VALUE: dict[int, grpc.StatusCode] = {s.value[0]: s for s in grpc.StatusCode}


def grpc_status_code(code: int) -> grpc.StatusCode:
    """The ``grpc.StatusCode`` member for a numeric gRPC status (UNKNOWN when unknown)."""
    return _STATUS_BY_VALUE.get(code, grpc.StatusCode.UNKNOWN)


async def _abort(context: grpc.aio.ServicerContext, exc: Exception, what: str) -> NoReturn:
    code, message = call_status(exc, what)
    await context.abort(grpc_status_code(code), message)
    raise AssertionError("context.abort returned")  # pragma: no cover - abort raises


def _trace_context(context: grpc.aio.ServicerContext) -> dict[str, str] | None:
    """The W3C trace context in the call's metadata, if any."""
    metadata = context.invocation_metadata() or ()
    if not any(key == TRACEPARENT for key, _ in metadata):
        return None
    return propagated(dict(metadata))


# The handlers below are closures specialised at start-up (compression on or off, a
# ``begin`` fast path or not) so a call pays for no branch it does not need.


def _unary(method: Method, service: ServiceApi, compression: grpc.Compression | None) -> Callable:
    name = method.name
    begin = method.begin
    handler = method.handler

    if begin is not None:

        async def call(request: Any, context: grpc.aio.ServicerContext) -> Any:
            try:
                future, finish = begin(service, request, _trace_context(context))
            except Exception as exc:
                await _abort(context, exc, name)
            try:
                # A client that goes away cancels this task, and awaiting the future
                # directly hands that cancellation to the scheduler's future, which
                # drops the request if it is still queued.
                return finish(await future)
            except Exception as exc:
                await _abort(context, exc, name)

    else:

        async def call(request: Any, context: grpc.aio.ServicerContext) -> Any:
            try:
                return await handler(service, request)
            except Exception as exc:
                await _abort(context, exc, name)

    if compression is None:
        return call

    async def compressed(request: Any, context: grpc.aio.ServicerContext) -> Any:
        response = await call(request, context)
        context.set_compression(compression)
        # grpc.aio applies a unary call's compression only with initial metadata sent
        # on their own; otherwise the response goes out uncompressed. They are sent once
        # the call has succeeded, so a failed call still answers trailers-only (no
        # ``grpc-encoding``), as the native transport does.
        await context.send_initial_metadata(())
        return response

    return compressed


def _stream(
    method: Method,
    service: ServiceApi,
    compression: grpc.Compression | None,
    open_streams: OpenStreams | None = None,
) -> Callable:
    handler = method.handler

    if method.infer:  # infer streams take the call's trace context (and shutdown) too

        def open_replies(requests: AsyncIterator[Any], context: grpc.aio.ServicerContext) -> Any:
            return handler(service, requests, _trace_context(context), open_streams)

    else:

        def open_replies(requests: AsyncIterator[Any], context: grpc.aio.ServicerContext) -> Any:
            return handler(service, requests)

    # grpc.aio runs a streaming handler on the event loop only when it is an async
    # generator function (anything else goes to a thread pool), hence the wrapper.
    async def call(
        requests: AsyncIterator[Any], context: grpc.aio.ServicerContext
    ) -> AsyncIterator[Any]:
        if compression is not None:
            context.set_compression(compression)
        try:
            async for reply in open_replies(requests, context):
                yield reply
        except StreamBacklogExceeded as exc:
            await context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, str(exc))
        except StreamEndedAtShutdown as exc:
            await context.abort(grpc.StatusCode.UNAVAILABLE, str(exc))

    return call


def _guard(method: Method, call: Callable, restriction: Restriction) -> Callable:
    """``call`` behind Triton's header check (UNAVAILABLE without the right value)."""
    header = restriction.header
    message = restriction.grpc_message()

    def allowed(context: grpc.aio.ServicerContext) -> bool:
        given = None
        for key, value in context.invocation_metadata() or ():
            if key == header:
                given = value
        return restriction.allows(given)

    if method.kind == STREAM:

        async def guarded_stream(requests: Any, context: grpc.aio.ServicerContext) -> Any:
            if not allowed(context):
                await context.abort(grpc.StatusCode.UNAVAILABLE, message)
            async for reply in call(requests, context):
                yield reply

        return guarded_stream

    async def guarded(request: Any, context: grpc.aio.ServicerContext) -> Any:
        if not allowed(context):
            await context.abort(grpc.StatusCode.UNAVAILABLE, message)
        return await call(request, context)

    return guarded


def _log_end(name: str, context: grpc.aio.ServicerContext, exc: BaseException | None) -> None:
    """The verbose line for a call that ended: OK, or the status it was aborted with."""
    if exc is None:
        logger.debug("GRPC call: %s: status 0 (OK)", name)
    elif isinstance(exc, grpc.aio.AbortError):
        code = context.code()
        value = code.value[0] if isinstance(code, grpc.StatusCode) else int(code or 2)
        logger.debug("GRPC call: %s: status %d: %s", name, value, context.details() or "")
    elif not isinstance(exc, asyncio.CancelledError):  # a client that went away: no status
        logger.debug("GRPC call: %s: status 2: %s", name, exc)  # grpc.aio answers UNKNOWN


def _logged(method: Method, call: Callable) -> Callable:
    """``call`` with its verbose line; only wrapped in when ``--log-verbose`` is on, so a
    server without it pays nothing per call."""
    name = method.name
    if method.kind == STREAM:

        async def logged_stream(requests: Any, context: grpc.aio.ServicerContext) -> Any:
            try:
                async for reply in call(requests, context):
                    yield reply
            except BaseException as exc:
                _log_end(name, context, exc)
                raise
            _log_end(name, context, None)

        return logged_stream

    async def logged(request: Any, context: grpc.aio.ServicerContext) -> Any:
        try:
            response = await call(request, context)
        except BaseException as exc:
            _log_end(name, context, exc)
            raise
        _log_end(name, context, None)
        return response

    return logged


def _serialize(message: Any) -> bytes:
    # Infer responses may come serialised already (response-cache hits reuse bytes).
    return message if type(message) is bytes else message.SerializeToString()


def _rpc_handler(
    method: Method,
    service: ServiceApi,
    compression: grpc.Compression | None,
    restriction: Restriction | None = None,
    open_streams: OpenStreams | None = None,
    verbose: bool = False,
) -> grpc.RpcMethodHandler:
    # Only inference responses are compressed, as Triton does.
    compression = compression if method.infer else None
    if method.kind == STREAM:
        call = _stream(method, service, compression, open_streams)
        if restriction is not None:
            call = _guard(method, call, restriction)
        if verbose:
            call = _logged(method, call)
        return grpc.stream_stream_rpc_method_handler(
            call,
            request_deserializer=method.request_type.FromString,
            response_serializer=_serialize,
        )
    call = _unary(method, service, compression)
    if restriction is not None:
        call = _guard(method, call, restriction)
    if verbose:
        call = _logged(method, call)
    return grpc.unary_unary_rpc_method_handler(
        call,
        request_deserializer=method.request_type.FromString,
        response_serializer=_serialize,
    )


class _MethodNotFound(grpc.GenericRpcHandler):
    """Answers any method the table lacks as the native transport does: UNIMPLEMENTED,
    naming the path (grpc.aio's own answer would be a bare "Method not found!")."""

    def service(self, handler_call_details: grpc.HandlerCallDetails) -> grpc.RpcMethodHandler:
        path = handler_call_details.method

        # A stream handler aborts before reading, so it fits unary and streaming clients.
        async def not_found(requests: Any, context: grpc.aio.ServicerContext) -> None:
            await context.abort(grpc.StatusCode.UNIMPLEMENTED, f"Method not found: {path}")

        return grpc.stream_stream_rpc_method_handler(not_found)


def method_handlers(
    service: ServiceApi,
    compression: grpc.Compression | None = None,
    restricted: RestrictedApis | None = None,
    open_streams: OpenStreams | None = None,
) -> dict[str, dict[str, grpc.RpcMethodHandler]]:
    """grpc.aio method handlers for every method in ``calls.METHODS``, by service name
    (``inference.GRPCInferenceService`` and ``grpc.health.v1.Health``) then method name.

    ``compression`` (when set) applies to the responses of inference methods only;
    methods of a group ``restricted`` names require its header; ModelStreamInfer calls
    are listed in ``open_streams`` (when given) so that shutdown can end the idle ones.
    Each call logs its status when debug logging is on now (``--log-verbose``), as the
    native transport's connections do when they open.
    """
    restricted = restricted or RestrictedApis()
    verbose = logger.isEnabledFor(logging.DEBUG)
    by_service: dict[str, dict[str, grpc.RpcMethodHandler]] = {}
    for path, method in METHODS.items():
        service_name = path[1:].rsplit("/", 1)[0]
        restriction = restricted.for_group(grpc_method_group(method.name))
        by_service.setdefault(service_name, {})[method.name] = _rpc_handler(
            method, service, compression, restriction, open_streams, verbose
        )
    return by_service


def add_methods_to_server(
    server: grpc.aio.Server,
    service: ServiceApi,
    compression: grpc.Compression | None = None,
    restricted: RestrictedApis | None = None,
    open_streams: OpenStreams | None = None,
) -> None:
    """Serve every method of ``calls.METHODS`` on ``server`` (before it starts)."""
    for name, handlers in method_handlers(service, compression, restricted, open_streams).items():
        server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(name, handlers),))
        # Registered methods (grpcio >= 1.63) are matched inside grpc core, without a
        # Python lookup per call; older grpcio serves them through the generic handler.
        register = getattr(server, "add_registered_method_handlers", None)
        if register is not None:
            register(name, handlers)
    # Generic handlers are asked in order, so this one only sees unknown methods.
    server.add_generic_rpc_handlers((_MethodNotFound(),))
