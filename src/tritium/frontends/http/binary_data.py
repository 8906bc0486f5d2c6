"""Tensor data that travels as raw bytes: binary-extension chunks and raw bodies.

Fixed-size types become numpy views over the received bytes (no copy) once the byte
count is checked against the shape. BYTES elements use Triton's serialization (a
4-byte little-endian length, then the bytes); the error texts are Triton's.
"""

from __future__ import annotations

import struct

import numpy as np

from tritium.core import datatypes
from tritium.core.errors import InvalidArgument

_U32 = struct.Struct("<I")


def deserialize_bytes(buffer: bytes | memoryview, count: int, name: str, model: str) -> np.ndarray:
    """Triton's length-prefixed BYTES elements to a flat object array of ``count``."""
    view = memoryview(buffer)
    total = len(view)
    items: list[bytes] = []
    offset = 0
    unpack = _U32.unpack_from
    while offset < total:
        if total - offset < 4:
            raise InvalidArgument(
                f"incomplete string length indicator for inference input '{name}' for model "
                f"'{model}', expecting 4 bytes but only {total - offset} bytes available. "
                "Please make sure the string length indicator is in one buffer."
            )
        (length,) = unpack(view, offset)
        offset += 4
        if length > total - offset:
            raise InvalidArgument(
                f"incomplete string data for inference input '{name}', expecting string of "
                f"length {length} but only {total - offset} bytes available"
            )
        items.append(bytes(view[offset : offset + length]))
        offset += length
    if len(items) != count:
        if len(items) > count:
            raise InvalidArgument(
                f"unexpected number of string elements {len(items)} for inference input "
                f"'{name}' for model '{model}', expecting {count}"
            )
        raise InvalidArgument(
            f"expected {count} string elements for inference input '{name}' for model "
            f"'{model}', got {len(items)}"
        )
    out = np.empty(count, dtype=np.object_)
    out[:] = items
    return out


def tensor_from_bytes(
    name: str,
    model: str,
    datatype: str,
    shape: tuple[int, ...],
    count: int,
    buffer: bytes | memoryview,
) -> np.ndarray:
    """An array over ``buffer`` (a view, no copy) after checking its size."""
    if datatype == "BYTES":
        return deserialize_bytes(buffer, count, name, model).reshape(shape)
    size = len(buffer)
    expected = count * datatypes.element_size(datatype)
    if size != expected:
        raise InvalidArgument(
            f"input byte size mismatch for input '{name}' for model '{model}'. "
            f"Expected {expected}, got {size}"
        )
    return np.frombuffer(buffer, dtype=datatypes.raw_dtype(datatype), count=count).reshape(shape)
