"""The method table of ``inference.GRPCInferenceService`` (and ``grpc.health.v1``),
independent of any transport.

Each :class:`Method` names its request message class, its kind (``unary`` or
``stream``) and an async handler that raises core :class:`TritiumError`\\ s; a transport
decodes bytes into the request class, calls the handler, encodes the answer and maps
errors through :func:`call_status`. Two fast paths let a transport avoid a task per
call: ``Method.begin`` (ModelInfer: submit now, finish from a done callback) and
:class:`InferStream` (ModelStreamInfer: one submission per request, responses emitted
from done callbacks in completion order).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from google.protobuf.message import Message
from grpc_health.v1 import health_pb2
from tritonclient.grpc import service_pb2

from tritium.core.completion import Completion
from tritium.core.errors import NotFound, TritiumError
from tritium.frontends.grpc import observability, shared_memory
from tritium.frontends.grpc.infer_bytes import begin_infer_bytes
from tritium.frontends.grpc.infer_calls import (
    Finish,
    begin_infer,
    model_infer,
    model_stream_infer,
)
from tritium.frontends.grpc.messages import (
    model_config_response,
    model_metadata_response,
    model_statistics_response,
    server_metadata_response,
)
from tritium.frontends.grpc.repository_calls import (
    repository_index,
    repository_model_load,
    repository_model_unload,
)
from tritium.service.api import ServiceApi

SERVICE = "inference.GRPCInferenceService"
HEALTH_SERVICE = "grpc.health.v1.Health"

UNARY = "unary"
STREAM = "stream"

BeginBytes = Callable[..., tuple[Completion, Finish]]


@dataclass(frozen=True, slots=True)
class Method:
    """One RPC: ``handler(service, request)`` for unary methods, ``handler(service,
    request_iterator)`` (an async generator of responses) for streams.

    ``begin(service, request) -> (future, finish)`` is the optional task-free path of a
    unary method: it raises at once for requests that cannot start; the response is
    ``finish(future.result())``. ``infer`` marks infer responses (the ones response
    compression applies to). ``begin_bytes(service, plans, data)`` is the same for a
    transport that has the serialised request: it decodes through ``plans`` and its
    ``finish`` returns the serialised response. The ``infer`` methods' ``handler``,
    ``begin`` and ``begin_bytes`` take one more argument: the W3C trace context of the
    call's metadata (``core.trace_context.propagated``), or None.
    """

    path: str
    name: str
    request_type: type[Message]
    kind: str
    handler: Callable[..., Any]
    begin: Callable[..., tuple[Completion, Finish]] | None = None
    infer: bool = False
    begin_bytes: BeginBytes | None = None


# --------------------------------------------------------------------- health


async def _server_live(service: ServiceApi, request: Any) -> service_pb2.ServerLiveResponse:
    try:
        return service_pb2.ServerLiveResponse(live=service.live())
    except TritiumError:
        return service_pb2.ServerLiveResponse(live=False)


async def _server_ready(service: ServiceApi, request: Any) -> service_pb2.ServerReadyResponse:
    try:
        return service_pb2.ServerReadyResponse(ready=service.ready())
    except TritiumError:
        return service_pb2.ServerReadyResponse(ready=False)


async def _model_ready(service: ServiceApi, request: Any) -> service_pb2.ModelReadyResponse:
    try:
        ready = service.model_ready(request.name, request.version)
    except NotFound:
        ready = False  # Triton answers an unknown model like an unready one
    return service_pb2.ModelReadyResponse(ready=ready)


async def _health_check(service: ServiceApi, request: Any) -> health_pb2.HealthCheckResponse:
    status = health_pb2.HealthCheckResponse
    return status(status=status.SERVING if service.ready() else status.NOT_SERVING)


# ------------------------------------------------------------------- metadata


async def _server_metadata(service: ServiceApi, request: Any) -> Any:
    return server_metadata_response(service.server_metadata())


async def _model_metadata(service: ServiceApi, request: Any) -> Any:
    return model_metadata_response(service.model_metadata(request.name, request.version))


async def _model_config(service: ServiceApi, request: Any) -> Any:
    return model_config_response(service.model_config(request.name, request.version))


async def _model_statistics(service: ServiceApi, request: Any) -> Any:
    return model_statistics_response(service.model_statistics(request.name, request.version))


# ------------------------------------------------------------ not served (yet)


def _shared_memory(name: str) -> Callable[[ServiceApi, Any], Awaitable[Any]]:
    """System and CUDA shared memory, served by ``shared_memory``."""
    snake = "".join(f"_{c.lower()}" if c.isupper() else c for c in name).lstrip("_")
    return getattr(shared_memory, snake)


# ---------------------------------------------------------------------- table


def _method(
    name: str,
    request_type: type[Message],
    handler: Callable[..., Any],
    *,
    kind: str = UNARY,
    service: str = SERVICE,
    begin: Callable[[ServiceApi, Any], tuple[Completion, Finish]] | None = None,
    infer: bool = False,
    begin_bytes: BeginBytes | None = None,
) -> Method:
    return Method(
        f"/{service}/{name}", name, request_type, kind, handler, begin, infer, begin_bytes
    )


def _table() -> dict[str, Method]:
    pb = service_pb2
    methods = [
        _method("ServerLive", pb.ServerLiveRequest, _server_live),
        _method("ServerReady", pb.ServerReadyRequest, _server_ready),
        _method("ModelReady", pb.ModelReadyRequest, _model_ready),
        _method("ServerMetadata", pb.ServerMetadataRequest, _server_metadata),
        _method("ModelMetadata", pb.ModelMetadataRequest, _model_metadata),
        _method("ModelConfig", pb.ModelConfigRequest, _model_config),
        _method("ModelStatistics", pb.ModelStatisticsRequest, _model_statistics),
        _method(
            "ModelInfer",
            pb.ModelInferRequest,
            model_infer,
            begin=begin_infer,
            infer=True,
            begin_bytes=begin_infer_bytes,
        ),
        _method(
            "ModelStreamInfer", pb.ModelInferRequest, model_stream_infer, kind=STREAM, infer=True
        ),
        _method("RepositoryIndex", pb.RepositoryIndexRequest, repository_index),
        _method("RepositoryModelLoad", pb.RepositoryModelLoadRequest, repository_model_load),
        _method(
            "RepositoryModelUnload", pb.RepositoryModelUnloadRequest, repository_model_unload
        ),
        _method(
            "SystemSharedMemoryStatus",
            pb.SystemSharedMemoryStatusRequest,
            _shared_memory("SystemSharedMemoryStatus"),
        ),
        _method(
            "SystemSharedMemoryRegister",
            pb.SystemSharedMemoryRegisterRequest,
            _shared_memory("SystemSharedMemoryRegister"),
        ),
        _method(
            "SystemSharedMemoryUnregister",
            pb.SystemSharedMemoryUnregisterRequest,
            _shared_memory("SystemSharedMemoryUnregister"),
        ),
        _method(
            "CudaSharedMemoryStatus",
            pb.CudaSharedMemoryStatusRequest,
            _shared_memory("CudaSharedMemoryStatus"),
        ),
        _method(
            "CudaSharedMemoryRegister",
            pb.CudaSharedMemoryRegisterRequest,
            _shared_memory("CudaSharedMemoryRegister"),
        ),
        _method(
            "CudaSharedMemoryUnregister",
            pb.CudaSharedMemoryUnregisterRequest,
            _shared_memory("CudaSharedMemoryUnregister"),
        ),
        _method("TraceSetting", pb.TraceSettingRequest, observability.trace_setting),
        _method("LogSettings", pb.LogSettingsRequest, observability.log_settings),
        _method("Check", health_pb2.HealthCheckRequest, _health_check, service=HEALTH_SERVICE),
    ]
    return {m.path: m for m in methods}


#: Every served method by its HTTP/2 ``:path``.
METHODS: dict[str, Method] = _table()
