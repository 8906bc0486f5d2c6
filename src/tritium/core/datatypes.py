"""Triton data types: wire names ("FP32"), config names ("TYPE_FP32") and numpy dtypes.

BYTES tensors are numpy object arrays of ``bytes``; on the wire and in shared memory they
use Triton's serialization (each element a 4-byte little-endian length then its bytes).
BF16 has no numpy type; it travels as raw 2-byte words (``uint16`` storage).
"""

from __future__ import annotations

import struct

import numpy as np

from tritium.core.errors import InvalidArgument

_U32 = struct.Struct("<I")

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


# BYTES tensors of at least this many elements (or four times as many bytes) are split and
# joined by numpy when every element has one length; below it numpy's set-up costs more
# than the plain loop it saves.
_NUMPY_BYTES_MIN = 256


def serialize_bytes(array: np.ndarray) -> bytes:
    """Triton's BYTES serialization: 4-byte LE length then data, row-major order."""
    items = array.reshape(-1).tolist()
    if len(items) >= _NUMPY_BYTES_MIN and set(map(type, items)) == {bytes}:
        lengths = list(map(len, items))
        first = lengths[0]
        if lengths.count(first) == len(lengths):
            # One length for all (empty ones included): laid out by numpy, no loop.
            if first == 0:
                return b"\0\0\0\0" * len(items)
            records = np.empty(len(items), dtype=[("n", "<u4"), ("s", f"V{first}")])
            records["n"] = first
            records["s"] = items
            return records.tobytes()
        pack = _U32.pack
        return b"".join([pack(n) + item for n, item in zip(lengths, items)])
    pack = _U32.pack
    parts: list[bytes] = []
    for item in items:
        if isinstance(item, str):
            item = item.encode("utf-8")
        elif not isinstance(item, (bytes, bytearray, memoryview)):
            item = str(item).encode("utf-8")
        parts.append(pack(len(item)))
        parts.append(bytes(item))
    return b"".join(parts)


def deserialize_bytes(
    buffer: bytes | memoryview, count: int | None = None, name: str = "", model: str = ""
) -> np.ndarray:
    """Inverse of :func:`serialize_bytes`: a flat object array of ``bytes``.

    Raises InvalidArgument, with Triton's texts naming input ``name`` of ``model``, when the
    buffer is truncated or (with ``count``) holds a different number of elements.
    Elements that all have one length (empty ones included) are split by numpy without a
    Python loop; each element then costs its ``bytes`` object and one array slot.
    """
    view = memoryview(buffer).cast("B")
    if len(view) >= _NUMPY_BYTES_MIN * 4:
        uniform = _uniform_elements(view, count)
        if uniform is not None:
            return uniform
    total = len(view)
    data = view.tobytes() if type(buffer) is not bytes else buffer
    items: list[bytes] = []
    append = items.append
    offset = 0
    unpack = _U32.unpack_from
    while offset < total:
        if total - offset < 4:
            raise InvalidArgument(
                f"incomplete string length indicator for inference input '{name}' for model "
                f"'{model}', expecting 4 bytes but only {total - offset} bytes available. "
                "Please make sure the string length indicator is in one buffer."
            )
        (length,) = unpack(data, offset)
        offset += 4
        if length > total - offset:
            raise InvalidArgument(
                f"incomplete string data for inference input '{name}', expecting string of "
                f"length {length} but only {total - offset} bytes available"
            )
        append(data[offset : offset + length])
        offset += length
    if count is not None and len(items) != count:
        if len(items) > count:
            raise InvalidArgument(
                f"unexpected number of string elements {len(items)} for inference input "
                f"'{name}' for model '{model}', expecting {count}"
            )
        raise InvalidArgument(
            f"expected {count} string elements for inference input '{name}' for model "
            f"'{model}', got {len(items)}"
        )
    out = np.empty(len(items), dtype=np.object_)
    out[:] = items
    return out


def _uniform_elements(view: memoryview, count: int | None) -> np.ndarray | None:
    """The elements of ``view`` when all have the same length, else None."""
    total = len(view)
    if total < 4:
        return None
    (length,) = _U32.unpack_from(view, 0)
    stride = 4 + length
    if count is None:
        if total % stride:
            return None
        count = total // stride
    elif count <= 1 or count * stride != total:
        return None
    records = np.frombuffer(view, dtype=np.dtype([("n", "<u4"), ("s", f"V{length}")]))
    if not (records["n"] == length).all():
        return None
    if length == 0:
        return np.full(count, b"", dtype=np.object_)
    return records["s"].astype(np.object_)


def tensor_from_bytes(
    name: str,
    model: str,
    datatype: str,
    shape: tuple[int, ...],
    count: int,
    buffer: bytes | memoryview,
) -> np.ndarray:
    """Input ``name`` of ``model`` from its raw bytes: a numpy view (no copy) for fixed-size
    types once the size matches ``count`` elements, decoded elements for BYTES."""
    if datatype == "BYTES":
        return deserialize_bytes(buffer, count, name, model).reshape(shape)
    size = len(buffer)
    expected = count * element_size(datatype)
    if size != expected:
        raise InvalidArgument(
            f"input byte size mismatch for input '{name}' for model '{model}'. "
            f"Expected {expected}, got {size}"
        )
    return np.frombuffer(buffer, dtype=raw_dtype(datatype), count=count).reshape(shape)
