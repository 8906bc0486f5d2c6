"""Triton data types: wire names ("FP32"), config names ("TYPE_FP32") and numpy dtypes.

BYTES tensors are numpy object arrays of ``bytes``, or :class:`PackedBytes` while they are
still in Triton's serialization (each element a 4-byte little-endian length then its bytes),
the form they have on the wire and in shared memory (see :mod:`tritium.core.packed_bytes`).
BF16 has no numpy type; it travels as raw 2-byte words (``uint16`` storage).
"""

from __future__ import annotations

import numpy as np

from tritium.core.errors import InvalidArgument
from tritium.core.packed_bytes import (
    PackedBytes,
    deserialize_bytes,
    pack_bytes,
    serialize_bytes,
    wire_bytes,
)

__all__ = [
    "RAW_DTYPES",
    "WIRE_TYPES",
    "PackedBytes",
    "config_to_wire",
    "deserialize_bytes",
    "element_count",
    "element_size",
    "is_valid",
    "numpy_dtype",
    "pack_bytes",
    "raw_dtype",
    "serialize_bytes",
    "tensor_from_bytes",
    "wire_bytes",
    "wire_from_numpy",
    "wire_to_config",
]

# wire name -> (numpy dtype, element byte size; 0 = variable)
_TABLE: dict[str, tuple[np.dtype, int]] = {
    "BOOL": (np.dtype(np.bool_), 1),
    "UINT8": (np.dtype(np.uint8), 1),
    "UINT16": (np.dtype(np.uint16), 2),
    "UINT32": (np.dtype(np.uint32), 4),
    "UINT64": (np.dtype(np.uint64), 8),
    "INT8": (np.dtype(np.int8), 1),
    "INT16": (np.dtype(np.int16), 2),
    "INT32": (np.dtype(np.int32), 4),
    "INT64": (np.dtype(np.int64), 8),
    "FP16": (np.dtype(np.float16), 2),
    "FP32": (np.dtype(np.float32), 4),
    "FP64": (np.dtype(np.float64), 8),
    "BYTES": (np.dtype(np.object_), 0),
    "BF16": (np.dtype(np.uint16), 2),
}

WIRE_TYPES: frozenset[str] = frozenset(_TABLE)

# Little-endian views used when reading or writing raw tensor bytes.
_LE = {name: dt.newbyteorder("<") for name, (dt, _) in _TABLE.items() if name != "BYTES"}
#: Wire name -> little-endian dtype of every fixed-size type (BYTES is not one): what
#: :func:`raw_dtype` answers, as a mapping for loops that look up each tensor's type.
RAW_DTYPES: dict[str, np.dtype] = _LE

_NUMPY_TO_WIRE: dict[np.dtype, str] = {
    dt: name for name, (dt, _) in _TABLE.items() if name not in ("BF16",)
}


def is_valid(wire: str) -> bool:
    return wire in _TABLE


def config_to_wire(config_name: str) -> str:
    """"TYPE_FP32" -> "FP32"; "TYPE_STRING" -> "BYTES"."""
    name = config_name[5:] if config_name.startswith("TYPE_") else config_name
    return "BYTES" if name == "STRING" else name


def wire_to_config(wire: str) -> str:
    """"FP32" -> "TYPE_FP32"; "BYTES" -> "TYPE_STRING"."""
    return "TYPE_STRING" if wire == "BYTES" else "TYPE_" + wire


def numpy_dtype(wire: str) -> np.dtype:
    """numpy dtype used to hold a tensor of ``wire`` type (object for BYTES)."""
    return _TABLE[wire][0]


def raw_dtype(wire: str) -> np.dtype:
    """Little-endian dtype for reading raw bytes of a fixed-size type."""
    return _LE[wire]


def element_size(wire: str) -> int:
    """Bytes per element; 0 for BYTES (variable)."""
    return _TABLE[wire][1]


def wire_from_numpy(dtype: np.dtype) -> str:
    """Wire name for a numpy dtype; object / bytes / str arrays are BYTES."""
    dtype = np.dtype(dtype)
    if dtype.kind in ("O", "S", "U"):
        return "BYTES"
    try:
        return _NUMPY_TO_WIRE[dtype.newbyteorder("=")]
    except KeyError:
        raise InvalidArgument(f"unsupported numpy data type '{dtype}'") from None


def element_count(shape: tuple[int, ...] | list[int]) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


def tensor_from_bytes(
    name: str,
    model: str,
    datatype: str,
    shape: tuple[int, ...],
    count: int,
    buffer: bytes | memoryview,
) -> np.ndarray:
    """Input ``name`` of ``model`` from its raw bytes: a numpy view (no copy) for fixed-size
    types once the size matches ``count`` elements; for BYTES, a :class:`PackedBytes` over
    the buffer once its length prefixes hold exactly ``count`` elements."""
    if datatype == "BYTES":
        # Tensor data is typed as an array; PackedBytes answers as the object array would
        # (an ignore rather than cast(): no call on the request path).
        return pack_bytes(buffer, count, shape, name, model)  # type: ignore[return-value]
    size = len(buffer)
    expected = count * element_size(datatype)
    if size != expected:
        raise InvalidArgument(
            f"input byte size mismatch for input '{name}' for model '{model}'. "
            f"Expected {expected}, got {size}"
        )
    try:
        return np.frombuffer(buffer, dtype=raw_dtype(datatype), count=count).reshape(shape)
    except ValueError:
        # No elements, but a dimension too large for any array (numpy refuses the shape).
        raise InvalidArgument(
            f"unexpected shape for input '{name}' for model '{model}': {list(shape)} is too "
            "large for a tensor"
        ) from None
