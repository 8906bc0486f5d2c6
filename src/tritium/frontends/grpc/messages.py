"""Sans-IO conversion of the service's health, metadata, config and statistics answers
into ``service_pb2`` messages.

The service speaks Triton's JSON shapes (the HTTP bodies); the proto messages have the
same field names, so ``json_format.ParseDict`` maps them and unknown keys are ignored.
"""

from __future__ import annotations

from typing import Any

from google.protobuf import json_format
from tritonclient.grpc import model_config_pb2, service_pb2

from tritium.core.errors import InternalError


def _parse(doc: dict[str, Any], message: Any, what: str) -> Any:
    try:
        return json_format.ParseDict(doc, message, ignore_unknown_fields=True)
    except json_format.ParseError as exc:
        raise InternalError(f"failed to convert the {what} to protobuf: {exc}") from None


def server_metadata_response(doc: dict[str, Any]) -> service_pb2.ServerMetadataResponse:
    return service_pb2.ServerMetadataResponse(
        name=doc.get("name", ""),
        version=doc.get("version", ""),
        extensions=list(doc.get("extensions", ())),
    )


def model_metadata_response(doc: dict[str, Any]) -> service_pb2.ModelMetadataResponse:
    message = service_pb2.ModelMetadataResponse(
        name=doc.get("name", ""),
        versions=[str(v) for v in doc.get("versions", ())],
        platform=doc.get("platform", ""),
    )
    for which, target in (("inputs", message.inputs), ("outputs", message.outputs)):
        for tensor in doc.get(which, ()):
            target.add(
                name=tensor["name"],
                datatype=tensor["datatype"],
                shape=[int(d) for d in tensor["shape"]],
            )
    return message


def model_config_response(config: dict[str, Any]) -> service_pb2.ModelConfigResponse:
    """Triton's config JSON (the HTTP ``/config`` body) as a ``ModelConfigResponse``."""
    parsed = _parse(config, model_config_pb2.ModelConfig(), "model configuration")
    return service_pb2.ModelConfigResponse(config=parsed)


def model_statistics_response(doc: dict[str, Any]) -> service_pb2.ModelStatisticsResponse:
    """The statistics extension's JSON as a ``ModelStatisticsResponse``."""
    return _parse(doc, service_pb2.ModelStatisticsResponse(), "model statistics")
