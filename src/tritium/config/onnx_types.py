"""ONNX tensor element types ⇄ Triton's configuration data types.

ONNX Runtime names a tensor's type as text (``"tensor(float)"``); the ONNX protobuf names
it by ``TensorProto`` element number. Both map to the same Triton types, as Triton's
onnxruntime backend maps them (STRING ⇄ TYPE_STRING, i.e. BYTES on the wire).
"""

from __future__ import annotations

# ONNX element name (as inside "tensor(...)") -> (TensorProto number, Triton config type)
_ELEMENTS: dict[str, tuple[int, str]] = {
    "float": (1, "TYPE_FP32"),
    "uint8": (2, "TYPE_UINT8"),
    "int8": (3, "TYPE_INT8"),
    "uint16": (4, "TYPE_UINT16"),
    "int16": (5, "TYPE_INT16"),
    "int32": (6, "TYPE_INT32"),
    "int64": (7, "TYPE_INT64"),
    "string": (8, "TYPE_STRING"),
    "bool": (9, "TYPE_BOOL"),
    "float16": (10, "TYPE_FP16"),
    "double": (11, "TYPE_FP64"),
    "uint32": (12, "TYPE_UINT32"),
    "uint64": (13, "TYPE_UINT64"),
    "bfloat16": (16, "TYPE_BF16"),
}

_BY_NUMBER: dict[int, str] = {number: config for number, config in _ELEMENTS.values()}
_ELEMENT_OF_CONFIG: dict[str, str] = {config: element for element, (_, config) in _ELEMENTS.items()}


def config_type_of_ort(type_text: str) -> str | None:
    """``"tensor(float)"`` -> ``"TYPE_FP32"``; ``optional(tensor(...))`` reads as the tensor
    inside. None for a type Triton cannot serve (sequences, maps, complex numbers)."""
    text = type_text
    if text.startswith("optional(") and text.endswith(")"):
        text = text[len("optional(") : -1]
    if not (text.startswith("tensor(") and text.endswith(")")):
        return None
    entry = _ELEMENTS.get(text[len("tensor(") : -1])
    return entry[1] if entry is not None else None


def config_type_of_element(number: int) -> str | None:
    """ONNX ``TensorProto`` element number -> Triton config type (None: not servable)."""
    return _BY_NUMBER.get(number)


def ort_type_of_config(config_type: str) -> str | None:
    """``"TYPE_FP32"`` -> ``"tensor(float)"`` (None for a type ONNX does not have)."""
    element = _ELEMENT_OF_CONFIG.get(config_type)
    return f"tensor({element})" if element is not None else None


def element_number_of_config(config_type: str) -> int | None:
    """``"TYPE_BF16"`` -> 16: the ``TensorProto`` number of a Triton config type."""
    element = _ELEMENT_OF_CONFIG.get(config_type)
    return _ELEMENTS[element][0] if element is not None else None
