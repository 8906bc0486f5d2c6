"""Writing tensors into an arena and reading them back as numpy arrays.

A tensor in an arena is described by ``[name, datatype, shape, nbytes]``. Fixed-size types
are stored raw (little-endian, row-major); BYTES use Triton's length-prefixed form. The
tensors of one message lie back to back in the order they are described, each at the next
``ALIGN`` boundary (see :func:`layout`), so offsets are never sent: both sides count them.
"""

from __future__ import annotations

import mmap
from collections.abc import Sequence

import numpy as np

from tritium.core import datatypes
from tritium.ipc.arena import align

Descriptor = list  # [name, datatype, shape, nbytes]

#: Tensors at least this big are written into an arena a slice at a time between event
#: loop iterations (:class:`SlicedWrites`): one 64 MiB copy would hold every other client
#: for tens of milliseconds.
SLICED_WRITE_BYTES = 512 * 1024
#: Bytes written per slice: about a millisecond of copying.
WRITE_SLICE = 2 * 1024 * 1024


def encoded_size(datatype: str, array: np.ndarray) -> tuple[int, bytes | memoryview | None]:
    """Bytes needed to store ``array``; BYTES are serialized here (returned for reuse),
    unless they are still :class:`~tritium.core.datatypes.PackedBytes` (their own form)."""
    if datatype == "BYTES":
        raw = datatypes.wire_bytes(array)
        return len(raw), raw
    return array.nbytes, None


def write(buf: mmap.mmap, offset: int, array: np.ndarray, raw: bytes | memoryview | None) -> int:
    """Write one tensor at ``offset``; returns its byte count."""
    if raw is not None:
        n = len(raw)
        buf[offset : offset + n] = raw
        return n
    n = array.nbytes
    if not n:
        return 0
    if array.flags.c_contiguous and array.dtype.byteorder != ">":
        # One memcpy, no temporary: the common case.
        buf[offset : offset + n] = array.data.cast("B")
    else:
        dst = np.ndarray(
            array.shape, dtype=array.dtype.newbyteorder("<"), buffer=buf, offset=offset
        )
        np.copyto(dst, array, casting="equiv")
    return n


def source_bytes(array: np.ndarray, raw: bytes | memoryview | None) -> memoryview:
    """The bytes :func:`write` would write for ``array`` (``raw`` for BYTES), as a view."""
    if raw is not None:
        return memoryview(raw).cast("B")
    if array.flags.c_contiguous and array.dtype.byteorder != ">":
        return array.data.cast("B")
    little = np.ascontiguousarray(array, dtype=array.dtype.newbyteorder("<"))
    return little.data.cast("B")


class SlicedWrites:
    """Big tensor writes into one arena, done ``WRITE_SLICE`` bytes per :meth:`step`.

    The writer adds ``(offset, tensor)``; the owner of the arena calls :meth:`step` once
    per event-loop iteration until it answers True, then tells the worker."""

    __slots__ = ("items", "_index", "_pos")

    def __init__(self) -> None:
        self.items: list[tuple[int, memoryview]] = []
        self._index = 0
        self._pos = 0

    def add(self, offset: int, array: np.ndarray | None, raw: bytes | memoryview | None) -> None:
        """Write ``array`` (or ``raw``, its bytes, when given) at ``offset``."""
        self.items.append((offset, source_bytes(array, raw)))  # type: ignore[arg-type]

    def clear(self) -> None:
        self.items.clear()
        self._index = self._pos = 0

    def step(self, buf: mmap.mmap | bytearray, budget: int = WRITE_SLICE) -> bool:
        """Write up to ``budget`` more bytes; True once everything is written."""
        items = self.items
        while budget > 0 and self._index < len(items):
            offset, src = items[self._index]
            pos = self._pos
            n = min(budget, len(src) - pos)
            buf[offset + pos : offset + pos + n] = src[pos : pos + n]
            budget -= n
            pos += n
            if pos == len(src):
                self._index += 1
                pos = 0
            self._pos = pos
        return self._index >= len(items)


def layout(sizes: list[int], start: int = 0) -> tuple[list[int], int]:
    """Aligned offsets for consecutive blocks of ``sizes``; returns (offsets, end)."""
    offsets = []
    pos = align(start)
    for size in sizes:
        offsets.append(pos)
        pos = align(pos + size)
    return offsets, pos


def view(buf: mmap.mmap, datatype: str, shape: list[int], offset: int, nbytes: int) -> np.ndarray:
    """A numpy view (no copy) of a fixed-size tensor, or a decoded object array for BYTES."""
    if datatype == "BYTES":
        count = datatypes.element_count(shape)
        flat = datatypes.deserialize_bytes(memoryview(buf)[offset : offset + nbytes], count)
        return flat.reshape(shape)
    dtype = datatypes.raw_dtype(datatype)
    return np.ndarray(tuple(shape), dtype=dtype, buffer=buf, offset=offset)


def copy_out(
    buf: mmap.mmap, datatype: str, shape: Sequence[int], offset: int, nbytes: int
) -> np.ndarray:
    """Like :func:`view` but owning its memory, so the arena can be reused at once.

    ``buf`` is a copy of the arena here: BYTES stay in their serialized form over it
    (:class:`~tritium.core.datatypes.PackedBytes`), decoded only if something asks."""
    if datatype == "BYTES":
        # Stands in for the object array (decoded when read as one).
        packed = datatypes.PackedBytes(memoryview(buf)[offset : offset + nbytes], tuple(shape))
        return packed  # type: ignore[return-value]
    dtype = datatypes.raw_dtype(datatype)
    return np.frombuffer(buf[offset : offset + nbytes], dtype=dtype).reshape(shape)
