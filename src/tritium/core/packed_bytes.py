"""Triton's BYTES serialization, and BYTES tensors kept in it until their elements are needed.

A BYTES tensor travels as its elements in row-major order, each a 4-byte little-endian
length then its bytes: in a binary HTTP body, a gRPC ``raw_input_contents`` entry, a
shared-memory region and a worker's arena alike. Decoding millions of elements into an
object array costs a Python object and an array slot each, and writing them back as much
again, all on the event loop; a :class:`PackedBytes` keeps the form it arrived in (checked
once, with Triton's error texts) so it can be written on in one copy, and decodes only
when something asks for its elements.
"""

from __future__ import annotations

import struct
from typing import Any

import numpy as np

from tritium.core.errors import InvalidArgument

_U32 = struct.Struct("<I")

# BYTES tensors of at least this many elements (or four times as many bytes) are split,
# joined and checked by numpy when every element has one length; below it numpy's set-up
# costs more than the plain loop it saves.
_NUMPY_BYTES_MIN = 256

_OBJECT = np.dtype(np.object_)


class PackedBytes:
    """A BYTES tensor of ``shape`` held as its serialized elements ``raw``.

    It answers ``shape``, ``size``, ``ndim``, ``dtype`` (object) and ``reshape`` without
    decoding; anything else (``np.asarray``, indexing, ``tolist``, other array attributes)
    decodes the elements once into a read-only object array and answers from it, so code
    written for object arrays keeps working. ``raw`` is the source of truth: the decoded
    array is read-only so that the two cannot drift apart.
    """

    __slots__ = ("raw", "shape", "_array")

    dtype = _OBJECT

    def __init__(self, raw: bytes | memoryview, shape: tuple[int, ...]) -> None:
        self.raw = raw
        self.shape = tuple(shape)
        self._array: np.ndarray | None = None

    @property
    def size(self) -> int:
        n = 1
        for d in self.shape:
            n *= d
        return n

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def reshape(self, *shape: Any) -> PackedBytes:
        """The same elements in another shape (row-major order is kept, so ``raw`` is too)."""
        if len(shape) == 1 and not isinstance(shape[0], int):
            shape = tuple(shape[0])
        size = self.size
        if -1 in shape:
            known = 1
            for d in shape:
                if d != -1:
                    known *= d
            if shape.count(-1) > 1 or known == 0 or size % known:
                raise ValueError(f"cannot reshape array of size {size} into shape {shape}")
            shape = tuple(size // known if d == -1 else d for d in shape)
        new = PackedBytes(self.raw, shape)
        if new.size != size:
            raise ValueError(f"cannot reshape array of size {size} into shape {shape}")
        if self._array is not None:
            new._array = self._array.reshape(new.shape)
        return new

    def decode(self) -> np.ndarray:
        """The elements as a read-only object array of ``bytes`` (decoded once)."""
        array = self._array
        if array is None:
            array = deserialize_bytes(self.raw, self.size).reshape(self.shape)
            array.flags.writeable = False
            self._array = array
        return array

    def copy(self) -> PackedBytes:
        """A copy owning its bytes (not tied to the buffer it was read from)."""
        return PackedBytes(bytes(self.raw), self.shape)

    def tolist(self) -> Any:
        return self.decode().tolist()

    def __array__(self, dtype: Any = None, copy: bool | None = None) -> np.ndarray:
        array = self.decode()
        if dtype is not None and np.dtype(dtype) != _OBJECT:
            return array.astype(dtype)
        return array.copy() if copy else array

    def __getattr__(self, name: str) -> Any:
        # Only attributes PackedBytes lacks get here: answer them as the object array would.
        if name.startswith("__") or name == "_array":
            raise AttributeError(name)
        return getattr(self.decode(), name)

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of unsized object")
        return self.shape[0]

    def __iter__(self) -> Any:
        return iter(self.decode())

    def __getitem__(self, key: Any) -> Any:
        return self.decode()[key]

    def __repr__(self) -> str:
        return f"PackedBytes(shape={self.shape}, nbytes={len(self.raw)})"


def wire_bytes(array: np.ndarray | PackedBytes) -> bytes | memoryview:
    """The serialized form of a BYTES tensor: a :class:`PackedBytes`'s own, else written."""
    if type(array) is PackedBytes:
        return array.raw
    return serialize_bytes(np.asarray(array, dtype=np.object_))


def pack_bytes(
    buffer: bytes | bytearray | memoryview,
    count: int,
    shape: tuple[int, ...],
    name: str = "",
    model: str = "",
) -> PackedBytes:
    """Input ``name`` of ``model`` kept as its serialized elements, once ``buffer`` is
    checked to hold exactly ``count`` of them (Triton's texts otherwise); no element is
    decoded. ``buffer`` is kept, not copied."""
    view = memoryview(buffer).cast("B") if type(buffer) is not bytes else buffer
    if not _uniform_lengths(view, count):
        found = _walk(view, name, model)
        if found != count:
            raise _count_error(found, count, name, model)
    return PackedBytes(view, shape)


def _uniform_lengths(view: bytes | memoryview, count: int) -> bool:
    """True when ``view`` is ``count`` elements of one length (checked by numpy, so only
    worth trying for many elements)."""
    total = len(view)
    if count < _NUMPY_BYTES_MIN or total < 4:
        return False
    (length,) = _U32.unpack_from(view, 0)
    stride = 4 + length
    if count * stride != total:
        return False
    lengths = np.ndarray((count,), dtype="<u4", buffer=view, strides=(stride,))
    return bool((lengths == length).all())


def _walk(view: bytes | memoryview, name: str, model: str) -> int:
    """The number of elements in ``view``, following its length prefixes."""
    total = len(view)
    offset = 0
    found = 0
    unpack = _U32.unpack_from
    while offset < total:
        if total - offset < 4:
            raise _short_prefix_error(total - offset, name, model)
        (length,) = unpack(view, offset)
        offset += 4
        if length > total - offset:
            raise _short_data_error(length, total - offset, name)
        offset += length
        found += 1
    return found


def _short_prefix_error(available: int, name: str, model: str) -> InvalidArgument:
    return InvalidArgument(
        f"incomplete string length indicator for inference input '{name}' for model "
        f"'{model}', expecting 4 bytes but only {available} bytes available. "
        "Please make sure the string length indicator is in one buffer."
    )


def _short_data_error(length: int, available: int, name: str) -> InvalidArgument:
    return InvalidArgument(
        f"incomplete string data for inference input '{name}', expecting string of "
        f"length {length} but only {available} bytes available"
    )


def _count_error(found: int, count: int, name: str, model: str) -> InvalidArgument:
    if found > count:
        return InvalidArgument(
            f"unexpected number of string elements {found} for inference input "
            f"'{name}' for model '{model}', expecting {count}"
        )
    return InvalidArgument(
        f"expected {count} string elements for inference input '{name}' for model "
        f"'{model}', got {found}"
    )


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
            raise _short_prefix_error(total - offset, name, model)
        (length,) = unpack(data, offset)
        offset += 4
        if length > total - offset:
            raise _short_data_error(length, total - offset, name)
        append(data[offset : offset + length])
        offset += length
    if count is not None and len(items) != count:
        raise _count_error(len(items), count, name, model)
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
