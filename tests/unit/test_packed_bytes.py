"""BYTES tensors kept in their serialized form: checked once with Triton's error texts,
written on as they came, decoded only when asked."""

from __future__ import annotations

import mmap

import numpy as np
import pytest

from tritium.core.datatypes import (
    PackedBytes,
    deserialize_bytes,
    pack_bytes,
    serialize_bytes,
    tensor_from_bytes,
    wire_bytes,
)
from tritium.core.errors import InvalidArgument
from tritium.ipc import tensors as ipc_tensors


def _wire(items: list[bytes]) -> bytes:
    return b"".join(len(i).to_bytes(4, "little") + i for i in items)


MIXED = [b"", b"a", b"\0\0", b"xyz\0", b"", b"hello"]


@pytest.mark.parametrize(
    "items",
    [MIXED, [b""] * 1000, [b"ab"] * 1000, [b"ab"] * 999 + [b"abc"], [b"x"]],
    ids=["mixed", "empty-uniform", "uniform", "almost-uniform", "one"],
)
def test_packed_elements_decode_as_their_items(items):
    wire = _wire(items)
    packed = pack_bytes(wire, len(items), (len(items),), "T", "m")
    assert packed.raw is wire  # kept, not copied
    assert wire_bytes(packed) is wire
    assert packed.decode().tolist() == items
    assert np.asarray(packed, dtype=object).tolist() == items


def test_a_memoryview_buffer_is_kept_as_bytes_of_it():
    body = bytearray(b"head" + _wire(MIXED))
    packed = pack_bytes(memoryview(body)[4:], len(MIXED), (2, 3))
    assert bytes(wire_bytes(packed)) == _wire(MIXED)
    assert packed.decode().shape == (2, 3)
    assert packed.copy().raw == _wire(MIXED) and type(packed.copy().raw) is bytes


# Triton's texts, the same whether the elements are kept packed or decoded.
BAD = [
    (b"\1\0\0", 1, "incomplete string length indicator"),
    (b"\5\0\0\0abc", 1, "incomplete string data for inference input 'T', expecting string"),
    (_wire([b"a", b"b", b"c"]), 2, "unexpected number of string elements 3"),
    (_wire([b"a", b"b"]), 3, "expected 3 string elements for inference input 'T'"),
    (_wire([b"ab"] * 300), 301, "expected 301 string elements"),
    (_wire([b"ab"] * 300)[:-1], 300, "incomplete string data"),
    (b"", 1, "expected 1 string elements"),
]


@pytest.mark.parametrize("wire,count,text", BAD)
def test_bad_buffers_are_refused_with_tritons_texts(wire, count, text):
    with pytest.raises(InvalidArgument) as packed:
        pack_bytes(wire, count, (count,), "T", "m")
    with pytest.raises(InvalidArgument) as decoded:
        deserialize_bytes(wire, count, "T", "m")
    assert text in packed.value.message
    assert packed.value.message == decoded.value.message


def test_tensor_from_bytes_keeps_bytes_packed():
    wire = _wire(MIXED)
    data = tensor_from_bytes("T", "m", "BYTES", (3, 2), 6, wire)
    assert type(data) is PackedBytes
    assert data.shape == (3, 2) and data.size == 6 and data.ndim == 2 and data.dtype == object


def test_reshape_keeps_the_bytes_and_checks_the_size():
    packed = pack_bytes(_wire(MIXED), 6, (6,))
    two = packed.reshape(2, 3)
    assert two.raw is packed.raw and two.shape == (2, 3)
    assert packed.reshape((3, -1)).shape == (3, 2)
    assert two.reshape(-1).tolist() == MIXED
    with pytest.raises(ValueError):
        packed.reshape(4, 2)
    with pytest.raises(ValueError):
        packed.reshape(-1, 4)


def test_it_answers_as_a_read_only_object_array():
    packed = pack_bytes(_wire(MIXED), 6, (2, 3))
    assert len(packed) == 2
    assert packed[1, 2] == b"hello"
    assert [row.tolist() for row in packed] == [MIXED[:3], MIXED[3:]]
    assert packed.flatten().tolist() == MIXED  # any other array attribute
    assert np.size(packed) == 6
    with pytest.raises(ValueError):
        packed.decode()[0, 0] = b"changed"  # raw stays the truth
    assert np.asarray(packed, dtype=object, copy=True).flags.writeable


def test_arena_writes_take_the_packed_form_as_it_is():
    wire = _wire(MIXED)
    packed = pack_bytes(wire, 6, (6,))
    size, raw = ipc_tensors.encoded_size("BYTES", packed)
    assert (size, raw) == (len(wire), wire)
    buf = mmap.mmap(-1, 4096)
    try:
        ipc_tensors.write(buf, 64, packed, raw)
        assert ipc_tensors.view(buf, "BYTES", [6], 64, size).tolist() == MIXED
        block = bytearray(buf[: 64 + size])  # what the server copies out of an arena
    finally:
        buf.close()
    out = ipc_tensors.copy_out(block, "BYTES", [3, 2], 64, size)
    assert type(out) is PackedBytes
    assert out.decode().tolist() == [MIXED[0:2], MIXED[2:4], MIXED[4:6]]


def test_object_arrays_are_still_serialized():
    array = np.array(MIXED, dtype=object)
    assert wire_bytes(array) == serialize_bytes(array) == _wire(MIXED)


@pytest.mark.parametrize("datatype", ["INT64", "FP32", "INT16"])
def test_an_empty_tensor_with_a_huge_dimension_is_refused_by_name(datatype):
    # No elements (one dimension is 0), so the byte size matches; numpy refuses the shape.
    shape = (0, 2**62)
    with pytest.raises(InvalidArgument, match="input 'IN' for model 'm'"):
        tensor_from_bytes("IN", "m", datatype, shape, 0, b"")
