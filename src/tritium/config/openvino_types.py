"""OpenVINO element types -> Triton's configuration data types.

OpenVINO names its element types ``f32``, ``u8``, ``boolean``...; each is one of ONNX's
element types, so the Triton type comes from :mod:`tritium.config.onnx_types`' table
(one mapping to Triton's types for both graph backends).
"""

from __future__ import annotations

from tritium.config.onnx_types import config_type_of_ort

# OpenVINO element type name -> ONNX element name.
_ONNX_ELEMENT: dict[str, str] = {
    "f32": "float",
    "f16": "float16",
    "bf16": "bfloat16",
    "f64": "double",
    "i8": "int8",
    "i16": "int16",
    "i32": "int32",
    "i64": "int64",
    "u8": "uint8",
    "u16": "uint16",
    "u32": "uint32",
    "u64": "uint64",
    "boolean": "bool",
    "string": "string",
}


def config_type_of_openvino(type_name: str) -> str | None:
    """``"f32"`` -> ``"TYPE_FP32"``; None for a type Triton cannot serve (u4, f8...)."""
    element = _ONNX_ELEMENT.get(type_name)
    return config_type_of_ort(f"tensor({element})") if element is not None else None
