"""A request's cache key: the model, the version serving it, each input's name and bytes.

As Triton 2.51 builds it: the shape, datatype, requested outputs, parameters and id of a
request are not part of it, so JSON, binary and gRPC requests with the same values share
one entry. The bytes are hashed where they lie (``blake2b`` over buffer views, no copy).
"""

from __future__ import annotations

from collections.abc import Sequence
from hashlib import blake2b
from operator import attrgetter
from struct import Struct
from typing import Any

import numpy as np

from tritium.core.packed_bytes import PackedBytes, wire_bytes
from tritium.core.types import InputTensor

#: 128-bit digests: a collision between two live entries is not a practical concern.
DIGEST_SIZE = 16
_OBJECT = np.dtype(np.object_)
_LENGTHS = Struct("<IQ")
_name = attrgetter("name")


def version_prefix(name: str, version: str, generation: int) -> bytes:
    """The part of every key of one loaded version. ``generation`` tells a reloaded
    version (same number) from the one it replaced, whose entries are dropped."""
    return f"{len(name)}:{name}/{version}/{generation}/".encode()


def request_key(prefix: bytes, inputs: Sequence[InputTensor]) -> bytes:
    """The digest of ``prefix`` and every input's name and raw bytes, in name order."""
    digest = blake2b(prefix, digest_size=DIGEST_SIZE)
    update = digest.update
    if len(inputs) > 1:
        inputs = sorted(inputs, key=_name)
    for tensor in inputs:
        name = tensor.name.encode()
        data: Any = tensor.data
        if type(data) is not np.ndarray or data.dtype.hasobject or not data.flags.c_contiguous:
            data = raw_view(data)
        # Lengths first, so (name, bytes) pairs cannot run into each other.
        update(_LENGTHS.pack(len(name), data.nbytes))
        update(name)
        update(data)
    return digest.digest()


def raw_view(data: np.ndarray | PackedBytes) -> memoryview:
    """The tensor's bytes as the wire carries them (BYTES serialized), without a copy
    for a contiguous numeric array."""
    if type(data) is PackedBytes or data.dtype == _OBJECT:
        return memoryview(wire_bytes(data)).cast("B")
    array = data if data.flags.c_contiguous else np.ascontiguousarray(data)
    return array.data.cast("B")
