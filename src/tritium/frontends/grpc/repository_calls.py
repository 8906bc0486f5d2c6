"""Triton's model repository extension over gRPC: ``RepositoryIndex``,
``RepositoryModelLoad`` and ``RepositoryModelUnload``, with Triton's parameter checks."""

from __future__ import annotations

from typing import Any

from tritonclient.grpc import service_pb2

from tritium.core.errors import InvalidArgument, Unsupported
from tritium.service.api import ServiceApi

_NAMED_REPOSITORY = "'repository_name' specification is not supported"


async def repository_index(service: ServiceApi, request: Any) -> Any:
    if request.repository_name:
        raise Unsupported(_NAMED_REPOSITORY)
    index = service_pb2.RepositoryIndexResponse.ModelIndex
    entries = await service.repository_index(request.ready)
    return service_pb2.RepositoryIndexResponse(
        models=[
            index(
                name=e["name"],
                version=e.get("version", ""),
                state=e.get("state", ""),
                reason=e.get("reason", ""),
            )
            for e in entries
        ]
    )


async def repository_model_load(service: ServiceApi, request: Any) -> Any:
    if request.repository_name:
        raise Unsupported(_NAMED_REPOSITORY)
    parameters: dict[str, Any] = {}
    for key, value in request.parameters.items():
        which = value.WhichOneof("parameter_choice")
        if key == "config":
            expected = "string_param"
        elif key.startswith("file:"):
            expected = "bytes_param"
        else:
            raise InvalidArgument(f"unrecognized load parameter '{key}'.")
        if which != expected:
            raise InvalidArgument(
                f"invalid value type for load parameter '{key}', expected {expected}."
            )
        parameters[key] = getattr(value, expected)
    await service.load_model(request.model_name, parameters)
    return service_pb2.RepositoryModelLoadResponse()


async def repository_model_unload(service: ServiceApi, request: Any) -> Any:
    if request.repository_name:
        raise Unsupported(_NAMED_REPOSITORY)
    unload_dependents = False
    if "unload_dependents" in request.parameters:
        value = request.parameters["unload_dependents"]
        if value.WhichOneof("parameter_choice") != "bool_param":
            raise InvalidArgument(
                "invalid value type for 'unload_dependents' parameter, expected bool_param."
            )
        unload_dependents = value.bool_param
    await service.unload_model(request.model_name, unload_dependents)
    return service_pb2.RepositoryModelUnloadResponse()
