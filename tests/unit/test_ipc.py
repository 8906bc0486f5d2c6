"""Server ⇄ worker transport pieces: framing, memfd arenas, tensors in arenas."""

from __future__ import annotations

import os
import socket

import numpy as np
import pytest

from tritium.ipc import Arena, FrameDecoder, MessageReader, encode, recv_fd, send_fd
from tritium.ipc import tensors as ipc_tensors


def test_frames_whole_split_and_batched():
    msgs = [{"op": "a", "n": 1}, {"op": "b", "x": [1, 2, 3]}, {"op": "c"}]
    stream = b"".join(encode(m) for m in msgs)
    assert FrameDecoder().feed(encode(msgs[0])) == [msgs[0]]  # the one-message fast path
    assert FrameDecoder().feed(stream) == msgs
    decoder = FrameDecoder()
    got = []
    for i in range(len(stream)):  # byte by byte
        got += decoder.feed(stream[i : i + 1])
    assert got == msgs


def test_oversized_frame_is_refused():
    with pytest.raises(ValueError, match="exceeds the limit"):
        FrameDecoder().feed(b"\xff\xff\xff\xff" + b"x")


def test_message_reader_over_a_socket():
    a, b = socket.socketpair()
    try:
        a.sendall(encode({"k": 1}) + encode({"k": 2}))
        reader = MessageReader(b)
        assert reader.next() == {"k": 1}
        assert reader.next() == {"k": 2}
        a.close()
        with pytest.raises(EOFError):
            reader.next()
    finally:
        b.close()


def test_arena_is_anonymous_and_shared_through_its_descriptor():
    before = set(os.listdir("/dev/shm")) if os.path.isdir("/dev/shm") else set()
    arena = Arena.create(1 << 16)
    a, b = socket.socketpair()
    try:
        send_fd(a, arena.fd)
        other = Arena(recv_fd(b), arena.size)
        arena.buf[10:15] = b"hello"
        assert other.buf[10:15] == b"hello"  # same pages
        other.close()
    finally:
        arena.close()
        a.close()
        b.close()
    after = set(os.listdir("/dev/shm")) if os.path.isdir("/dev/shm") else set()
    assert after == before  # nothing named, nothing to leak


@pytest.mark.parametrize(
    "datatype,array",
    [
        ("FP32", np.arange(12, dtype=np.float32).reshape(3, 4)),
        ("FP32", np.arange(12, dtype=np.float32).reshape(3, 4).T),  # not contiguous
        ("INT64", np.array([-1, 2**62], dtype=np.int64)),
        ("BOOL", np.array([True, False])),
        ("FP16", np.array([1.5, -2.0], dtype=np.float16)),
        ("BF16", np.array([0x3F80, 0xC000], dtype=np.uint16)),
        ("INT32", np.array([1, 2], dtype=">i4")),  # big-endian input still lands little-endian
        ("BYTES", np.array([b"a", b"", b"\x00\xff"], dtype=np.object_)),
    ],
)
def test_tensor_round_trip_through_an_arena(datatype, array):
    arena = Arena.create(1 << 16)
    try:
        size, raw = ipc_tensors.encoded_size(datatype, array)
        (offset,), end = ipc_tensors.layout([size], start=3)
        assert offset % 64 == 0 and end >= offset + size
        nbytes = ipc_tensors.write(arena.buf, offset, array, raw)
        assert nbytes == size
        for read in (ipc_tensors.view, ipc_tensors.copy_out):
            got = read(arena.buf, datatype, list(array.shape), offset, nbytes)
            assert got.shape == array.shape
            if datatype == "BYTES":
                assert list(got) == list(array)
            else:
                np.testing.assert_array_equal(got, array)
        copy = ipc_tensors.copy_out(arena.buf, datatype, list(array.shape), offset, nbytes)
        arena.buf[offset : offset + nbytes] = bytes(nbytes)  # the arena is reused...
        if datatype not in ("BYTES",) and nbytes:
            np.testing.assert_array_equal(copy, array)  # ...the copy is not affected
        del copy, got
    finally:
        arena.close()
