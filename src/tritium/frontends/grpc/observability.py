"""Triton's logging and trace extensions over gRPC (``LogSettings``, ``TraceSetting``).

The settings maps of the protos become the same JSON-like dicts the HTTP routes pass to
the service, and the service's answer goes back as the response map.
"""

from __future__ import annotations

from typing import Any

from tritonclient.grpc import service_pb2

from tritium.service.api import ServiceApi


async def log_settings(service: ServiceApi, request: Any) -> Any:
    doc: dict[str, Any] = {}
    for key, setting in request.settings.items():
        which = setting.WhichOneof("parameter_choice")
        doc[key] = getattr(setting, which) if which else None
    values = service.log_settings.update(doc) if doc else service.log_settings.as_json()
    response = service_pb2.LogSettingsResponse()
    for key, value in values.items():
        slot = response.settings[key]
        if isinstance(value, bool):
            slot.bool_param = value
        elif isinstance(value, int):
            slot.uint32_param = value
        else:
            slot.string_param = str(value)
    return response


async def trace_setting(service: ServiceApi, request: Any) -> Any:
    traces = service.trace_settings
    doc: dict[str, Any] = {}
    for key, setting in request.settings.items():
        values = list(setting.value)
        if not values:
            doc[key] = None  # an empty list clears the setting, as JSON null does
        elif key == "trace_level":
            doc[key] = values
        else:
            doc[key] = values[0]
    answer = traces.update(request.model_name, doc) if doc else traces.get(request.model_name)
    response = service_pb2.TraceSettingResponse()
    for key, value in answer.items():
        response.settings[key].value.extend(value if isinstance(value, list) else [str(value)])
    return response
