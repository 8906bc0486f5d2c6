"""Server ⇄ worker transport pieces: framing, memfd arenas, tensors in arenas."""

from __future__ import annotations

import os
import socket

import numpy as np
import pytest

from tritium.ipc import Arena, FrameDecoder, MessageReader, encode, recv_fd, send_fd
from tritium.ipc import tensors as ipc_tensors
from tritium.ipc.messages import (
    Exec,
    Fini,
    MalformedMessage,
    NewArena,
    RequestItem,
    UnknownMessage,
    Unmap,
    decode_to_server,
    decode_to_worker,
)


def test_frames_whole_split_and_batched():
    item = RequestItem("r", 0, 0, {}, None, [("IN", "FP32", [1, 2, 3], 24)])
    msgs = [Unmap(1), Exec([item, 0], poll=True), Fini()]
    stream = b"".join(encode(m) for m in msgs)
    # the one-message fast path
    assert FrameDecoder(decode_to_worker).feed(encode(msgs[0])) == [msgs[0]]
    assert FrameDecoder(decode_to_worker).feed(stream) == msgs
    decoder = FrameDecoder(decode_to_worker)
    got = []
    for i in range(len(stream)):  # byte by byte
        got += decoder.feed(stream[i : i + 1])
    assert got == msgs


def test_oversized_frame_is_refused():
    with pytest.raises(ValueError, match="exceeds the limit"):
        FrameDecoder(decode_to_worker).feed(b"\xff\xff\xff\xff" + b"x")


def _frame(body: bytes) -> bytes:
    return len(body).to_bytes(4, "little") + body


def test_an_unknown_kind_is_named_and_a_malformed_message_is_refused():
    with pytest.raises(UnknownMessage, match="unknown message kind 'bogus'"):
        decode_to_worker(b'{"op":"bogus"}')
    # A kind of the other direction is unknown here too.
    with pytest.raises(UnknownMessage, match="'exec'"):
        decode_to_server(encode(Fini())[4:].replace(b"fini", b"exec"))
    with pytest.raises(MalformedMessage, match="'arena'"):
        decode_to_worker(b'{"op":"arena","which":"in"}')  # no size
    with pytest.raises(MalformedMessage):
        decode_to_worker(b"[1,2]")


def test_a_frame_that_does_not_decode_is_skipped_with_its_error():
    errors: list[ValueError] = []
    decoder = FrameDecoder(decode_to_worker, errors.append)
    stream = encode(Unmap(1)) + _frame(b'{"op":"bogus"}') + encode(NewArena("in", 8))
    assert decoder.feed(stream) == [Unmap(1), NewArena("in", 8)]
    assert decoder.feed(_frame(b'{"op":"nope"}')) == []  # the one-message path too
    assert [type(e) for e in errors] == [UnknownMessage, UnknownMessage]
    # Without a handler the error is raised; the frames after it stay for the next feed.
    strict = FrameDecoder(decode_to_worker)
    with pytest.raises(UnknownMessage):
        strict.feed(_frame(b'{"op":"bogus"}') + encode(Fini()))
    assert strict.feed(b"") == [Fini()]


def test_message_reader_over_a_socket():
    a, b = socket.socketpair()
    try:
        a.sendall(encode(Unmap(1)) + encode(Unmap(2)))
        reader = MessageReader(b, decode_to_worker)
        assert reader.next() == Unmap(1)
        assert reader.next() == Unmap(2)
        a.close()
        with pytest.raises(EOFError):
            reader.next()
    finally:
        b.close()


@pytest.mark.serial
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
