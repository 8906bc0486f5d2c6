"""Records of the call channel: requests a worker makes of the server (BLS) and replies.

The channel is a ``SOCK_SEQPACKET`` socket pair, so one ``sendmsg`` is one record and its
descriptor (if any) arrives with it. A record is a 4-byte little-endian length, a JSON
document (a message of ``messages``: a call, or a ``CallReply``), then the tensor bytes
when they are small (inline). Larger tensors travel in a
memfd arena made for the record, whose descriptor is attached: the receiver maps it and
reads the tensors in place. Tensors lie back to back at ``ALIGN`` boundaries, as in the
instance arenas; the document describes them as ``[name, datatype, shape, nbytes]``.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import numpy as np

from tritium.core import datatypes
from tritium.ipc import tensors as ipc_tensors
from tritium.ipc.arena import Arena
from tritium.ipc.messages import encode

_M = TypeVar("_M")

_LEN = struct.Struct("<I")

#: Tensor bytes up to this size travel inside the record; more go through a memfd.
INLINE_LIMIT = 64 * 1024
#: Upper bound of one record (the document and inline tensors), within socket buffers;
#: both ends refuse to send a bigger one (it would arrive cut short).
MAX_RECORD = INLINE_LIMIT + (1 << 16)

#: Answers of one streamed call (``exec(decoupled=True)``) the server sends ahead of what
#: model code took; the worker reports what it took (a ``more`` record) as it goes.
MAX_UNREAD = 1024

Tensor = tuple[str, str, np.ndarray]  # (name, datatype, array)


class PackedTensors:
    """Tensors written for one record: descriptors, and inline bytes or an arena."""

    __slots__ = ("descriptors", "inline", "arena")

    def __init__(
        self, descriptors: list[list[Any]], inline: bytes | bytearray, arena: Arena | None
    ) -> None:
        self.descriptors = descriptors
        self.inline = inline
        self.arena = arena


def pack_tensors(tensors: list[Tensor]) -> PackedTensors:
    """Lay ``tensors`` out for a record (inline when small, else in a fresh memfd arena)."""
    sizes = []
    raws = []
    for _, datatype, array in tensors:
        size, raw = ipc_tensors.encoded_size(datatype, array)
        sizes.append(size)
        raws.append(raw)
    offsets, end = ipc_tensors.layout(sizes)
    descriptors = [
        [name, datatype, list(array.shape), size]
        for (name, datatype, array), size in zip(tensors, sizes)
    ]
    arena: Arena | None = None
    if end <= INLINE_LIMIT:
        buf: Any = bytearray(end)
        inline: bytes | bytearray = buf
    else:
        arena = Arena.create(end)
        buf = arena.buf
        inline = b""
    for (_, _, array), offset, raw in zip(tensors, offsets, raws):
        ipc_tensors.write(buf, offset, np.ascontiguousarray(array) if raw is None else array, raw)
    return PackedTensors(descriptors, inline, arena)


def encode_record(message: Any, inline: bytes | bytearray = b"") -> bytes:
    """One record: ``message`` (a ``messages`` struct), then its inline tensor bytes."""
    body = encode(message)
    return b"".join((_LEN.pack(len(body)), body, inline))


def decode_record(data: bytes, decode: Callable[[Any], _M]) -> tuple[_M, memoryview]:
    """The record's message (``decode``: ``messages.decode_call`` or
    ``decode_call_reply``) and its inline tensor bytes."""
    (length,) = _LEN.unpack_from(data)
    view = memoryview(data)
    return decode(view[4 : 4 + length]), view[4 + length :]


def unpack_tensors(descriptors: Sequence[Sequence[Any]], buf: Any) -> list[Tensor]:
    """Arrays over ``buf`` (inline bytes or an arena mapping): views, no copies, except
    BYTES, which are decoded."""
    out: list[Tensor] = []
    offsets, end = ipc_tensors.layout([d[3] for d in descriptors])
    if end > len(buf):
        raise ValueError("tensor descriptors run past the record's data")
    for (name, datatype, shape, nbytes), offset in zip(descriptors, offsets):
        if nbytes == 0 and datatype != "BYTES":
            array = np.empty(shape, datatypes.raw_dtype(datatype))
        else:
            array = ipc_tensors.view(buf, datatype, shape, offset, nbytes)
        out.append((name, datatype, array))
    return out


def attach_tensors(
    message: Any, key: str, tensors: list[Tensor]
) -> tuple[bytes | bytearray, Arena | None]:
    """Describe ``tensors`` in ``message``'s field ``key`` (and the arena's size in its
    ``shm`` when they need one); returns the record's inline bytes and that arena."""
    if not tensors:
        return b"", None
    packed = pack_tensors(tensors)
    setattr(message, key, packed.descriptors)
    if packed.arena is not None:
        message.shm = packed.arena.size
    return packed.inline, packed.arena
