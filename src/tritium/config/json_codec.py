"""ModelConfig ⇄ the JSON document of Triton's ``GET /v2/models/<model>/config``.

Triton prints the protobuf as JSON with snake_case names, every field without presence
(scalars, lists, maps) even when empty, message fields and oneof members only when set,
in declaration order. Protobuf renders 64-bit integers as strings; Triton then turns a
fixed list of them back into numbers and leaves the rest as strings. ``config_to_json``
reproduces that document key for key, and ``config_from_dict`` reads it back (as well as
the dicts model.py's ``auto_complete_config`` works with).
"""

from __future__ import annotations

import base64
import math
from typing import Any

import numpy as np
from google.protobuf import json_format
from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import Message
from tritonclient.grpc.model_config_pb2 import ModelConfig

from tritium.config.errors import ConfigError

_F = FieldDescriptor
_INT64_TYPES = frozenset(
    {_F.TYPE_INT64, _F.TYPE_UINT64, _F.TYPE_SINT64, _F.TYPE_FIXED64, _F.TYPE_SFIXED64}
)
_FLOAT_TYPES = frozenset({_F.TYPE_FLOAT, _F.TYPE_DOUBLE})

# 64-bit fields Triton's ModelConfigToJson prints as JSON numbers, by path of field names
# (list indices and map keys left out). Every other 64-bit field stays a string:
# instance_group.secondary_devices.device_id, the CUDA graph shapes, and
# sequence_batching.state.initial_state.dims (Triton looks for "initial_state" on the
# batcher instead of on the state, so it never converts those).
_NUMERIC_INT64_PATHS: frozenset[tuple[str, ...]] = frozenset(
    {
        ("input", "dims"),
        ("input", "reshape", "shape"),
        ("output", "dims"),
        ("output", "reshape", "shape"),
        ("version_policy", "specific", "versions"),
        ("dynamic_batching", "max_queue_delay_microseconds"),
        ("dynamic_batching", "priority_levels"),
        ("dynamic_batching", "default_priority_level"),
        ("dynamic_batching", "default_queue_policy", "default_timeout_microseconds"),
        ("dynamic_batching", "priority_queue_policy", "default_timeout_microseconds"),
        ("sequence_batching", "max_sequence_idle_microseconds"),
        ("sequence_batching", "oldest", "max_queue_delay_microseconds"),
        ("sequence_batching", "direct", "max_queue_delay_microseconds"),
        ("sequence_batching", "state", "dims"),
        ("ensemble_scheduling", "step", "model_version"),
        ("model_warmup", "inputs", "dims"),
    }
)


def config_to_json(config: ModelConfig) -> dict[str, Any]:
    """The JSON object Triton returns for this configuration (ready for orjson/json)."""
    return _message(config, ())


def config_from_dict(data: dict[str, Any]) -> ModelConfig:
    """Build a ModelConfig from its JSON form.

    Accepts what ``config_to_json`` produces and what model.py auto-completion builds:
    snake_case or camelCase names, 64-bit integers as numbers or strings, enums by name.
    Unknown fields are an error, as in Triton.
    """
    config = ModelConfig()
    try:
        json_format.ParseDict(data, config)
    except json_format.ParseError as exc:
        raise ConfigError(f"invalid model configuration: {exc}") from None
    return config


def _message(message: Message, path: tuple[str, ...]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    descriptor: Descriptor = message.DESCRIPTOR
    for field in descriptor.fields:
        value = getattr(message, field.name)
        field_path = (*path, field.name)
        if _is_map(field):
            value_field = field.message_type.fields_by_name["value"]
            out[field.name] = {
                _map_key(k): _value(value_field, v, field_path) for k, v in value.items()
            }
        elif _is_repeated(field):
            out[field.name] = [_value(field, v, field_path) for v in value]
        elif (
            field.type == _F.TYPE_MESSAGE
            or field.containing_oneof is not None
            or _has_presence(field)
        ):
            if message.HasField(field.name):
                out[field.name] = _value(field, value, field_path)
        else:
            out[field.name] = _value(field, value, field_path)
    return out


def _value(field: FieldDescriptor, value: Any, path: tuple[str, ...]) -> Any:
    kind = field.type
    if kind == _F.TYPE_MESSAGE:
        return _message(value, path)
    if kind == _F.TYPE_ENUM:
        enum_value = field.enum_type.values_by_number.get(value)
        return enum_value.name if enum_value is not None else value
    if kind in _INT64_TYPES:
        return int(value) if path in _NUMERIC_INT64_PATHS else str(value)
    if kind in _FLOAT_TYPES:
        return _float(value, kind == _F.TYPE_FLOAT)
    if kind == _F.TYPE_BYTES:
        return base64.b64encode(value).decode("ascii")
    return value


def _float(value: float, single: bool) -> float | int | str:
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    if single:
        # A float32 widened to double prints as 0.10000000149011612; protobuf prints the
        # shortest text that reads back as the same float32 (0.1).
        value = float(str(np.float32(value)))
    # C++ protobuf writes integral floats without a fraction ("1", not "1.0").
    return int(value) if value.is_integer() else value


def _map_key(key: Any) -> str:
    if isinstance(key, bool):
        return "true" if key else "false"
    return str(key)


def _is_map(field: FieldDescriptor) -> bool:
    return field.type == _F.TYPE_MESSAGE and field.message_type.GetOptions().map_entry


def _is_repeated(field: FieldDescriptor) -> bool:
    is_repeated = getattr(field, "is_repeated", None)  # protobuf >= 6; `label` is deprecated
    if is_repeated is not None:
        return bool(is_repeated)
    return field.label == _F.LABEL_REPEATED


def _has_presence(field: FieldDescriptor) -> bool:
    return bool(getattr(field, "has_presence", False))
