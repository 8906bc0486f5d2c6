"""The batch messages between server and worker, without a worker: arenas are bytearrays."""

from __future__ import annotations

import msgspec
import numpy as np
import pytest

from tritium.core import InferRequest, InputTensor, RequestedOutput
from tritium.core.datatypes import pack_bytes, serialize_bytes
from tritium.core.errors import InternalError
from tritium.ipc.arena import align
from tritium.ipc.messages import Exec, ReplyItem, Result, decode_to_worker
from tritium.ipc.tensors import SLICED_WRITE_BYTES, SlicedWrites
from tritium.workers.batch_messages import read_responses, write_batch


class Arena:
    def __init__(self, size: int = 1 << 16) -> None:
        self.buf = bytearray(size)
        self.size = size
        self.asked: list[int] = []

    def __call__(self, size: int) -> Arena:
        self.asked.append(size)
        return self


def request(key: object, *arrays: np.ndarray, outputs: tuple[str, ...] | None = None):
    r = InferRequest("m", "1", "")
    r.layout_key = key
    r.inputs = [InputTensor(f"IN{i}", "FP32", a.shape, a) for i, a in enumerate(arrays)]
    if outputs is not None:
        r.outputs = [RequestedOutput(name) for name in outputs]
    return r


def decode(frame: bytes) -> Exec:
    message = decode_to_worker(frame[4:])
    assert isinstance(message, Exec)
    return message


def test_inputs_lie_back_to_back_after_the_flags_and_repeats_travel_as_zero():
    key = object()
    four, six = np.arange(4, dtype=np.float32), np.arange(6, dtype=np.float32)
    batch = [request(key, four), request(key, four + 1), request(key, six), request(None, four)]
    arena = Arena()
    frame, layout = write_batch(batch, arena)
    items = decode(frame).requests
    assert [type(item) is int for item in items] == [False, True, False, False]
    assert items[0].inputs == [("IN0", "FP32", [4], 16)]  # type: ignore[union-attr]
    pos = align(len(batch))
    for r in batch:
        data = r.inputs[0].data
        np.testing.assert_array_equal(np.frombuffer(arena.buf, np.float32, data.size, pos), data)
        pos = align(pos + data.nbytes)
    assert arena.asked == [pos] and layout is None  # several requests: nothing to reuse
    assert bytes(arena.buf[: len(batch)]) == bytes(len(batch))  # cancellation flags clear


def test_a_single_fixed_size_request_returns_its_layout():
    frame, layout = write_batch([request(object(), np.ones(3, np.float32))], Arena())
    assert layout is not None
    frames, *where = layout
    assert where == [[64], [12], 128]
    # The exec message as sent, and its twin with the poll hint, for reuse either way.
    assert frames[0] == frame and b"poll" not in frame and not decode(frame).poll
    assert decode(frames[1]) == msgspec.structs.replace(decode(frame), poll=True)
    hinted, layout = write_batch([request(object(), np.ones(3, np.float32))], Arena(), poll=True)
    assert decode(hinted).poll is True and layout is not None and layout[0][1] == hinted
    strings = InferRequest("m", "1", "")
    strings.layout_key = object()
    strings.inputs = [InputTensor("S", "BYTES", (1,), np.array([b"ab"], dtype=np.object_))]
    frame, layout = write_batch([strings], Arena())
    assert layout is None  # BYTES sizes change with the content
    assert decode(frame).requests[0].inputs == [("S", "BYTES", [1], 6)]  # type: ignore[union-attr]


def _reply(items: list, end: int) -> Result:
    return Result(items, [0, 0, 0], end)


def test_replies_are_read_back_to_back_with_repeats_and_errors():
    out = bytearray(1024)
    a, b = np.arange(4, dtype=np.int32), np.arange(4, 8, dtype=np.int32)
    text = serialize_bytes(np.array([b"hi", b"there"], dtype=np.object_))
    out[0:16] = a.tobytes()
    out[64:80] = b.tobytes()
    out[128 : 128 + len(text)] = text
    items = [
        ReplyItem([("O", "INT32", [4], 16)]),
        0,
        ReplyItem(error=("INVALID_ARG", "bad input")),
        ReplyItem([("S", "BYTES", [2], len(text)), ("E", "FP32", [0], 0)], params={"k": 1}),
    ]
    batch = [request(None, np.ones(1, np.float32)) for _ in items]
    responses = read_responses(batch, _reply(items, align(128 + len(text))), out, "m_0")
    np.testing.assert_array_equal(responses[0].outputs[0].data, a)
    np.testing.assert_array_equal(responses[1].outputs[0].data, b)
    assert responses[2].error is not None and responses[2].error.message == "bad input"
    strings, empty = responses[3].outputs
    assert list(strings.data) == [b"hi", b"there"] and empty.data.shape == (0,)
    assert responses[3].parameters == {"k": 1}
    out[0:16] = bytes(16)  # the arena takes the next batch: answers keep their values
    np.testing.assert_array_equal(responses[0].outputs[0].data, a)
    responses[0].outputs[0].data[0] = 9  # and are writable


def test_outputs_beyond_the_reply_end_are_a_malformed_reply():
    items = [ReplyItem([("O", "INT32", [4], 16)]), 0]
    batch = [request(None, np.ones(1, np.float32)) for _ in items]
    with pytest.raises(InternalError, match="malformed reply"):
        read_responses(batch, _reply(items, 16), bytearray(64), "m_0")
    with pytest.raises(InternalError, match="malformed reply"):
        read_responses(batch[:1], _reply(items, 80), bytearray(128), "m_0")


def test_big_inputs_are_left_to_sliced_writes_and_land_where_described():
    big = np.arange(SLICED_WRITE_BYTES // 4 + 3, dtype=np.float32)  # just over the line
    small = np.arange(5, dtype=np.float32)
    swapped = np.arange(SLICED_WRITE_BYTES // 8, dtype=">f8")  # not in the wire's order
    packed = pack_bytes(b"\0\0\0\0" * (SLICED_WRITE_BYTES // 4), SLICED_WRITE_BYTES // 4, (-1,))
    r = request(object(), small, big)
    r.inputs.append(InputTensor("W", "FP64", swapped.shape, swapped))
    r.inputs.append(InputTensor("S", "BYTES", packed.shape, packed))
    arena = Arena(4 << 20)
    sliced = SlicedWrites()
    frame, _ = write_batch([r], arena, sliced=sliced)
    assert [src.nbytes for _, src in sliced.items] == [big.nbytes, swapped.nbytes, len(packed.raw)]
    pos = align(1)
    assert np.array_equal(np.frombuffer(arena.buf, np.float32, 5, pos), small)  # written now
    big_at = align(pos + small.nbytes)
    assert not np.frombuffer(arena.buf, np.float32, big.size, big_at).any()  # not yet
    steps = 1
    while not sliced.step(arena.buf, budget=300_000):
        steps += 1
    assert steps == -(-(big.nbytes + swapped.nbytes + len(packed.raw)) // 300_000)
    assert np.array_equal(np.frombuffer(arena.buf, np.float32, big.size, big_at), big)
    swapped_at = align(big_at + big.nbytes)
    got = np.frombuffer(arena.buf, "<f8", swapped.size, swapped_at)
    assert np.array_equal(got, swapped)
    bytes_at = align(swapped_at + swapped.nbytes)
    assert bytes(arena.buf[bytes_at : bytes_at + len(packed.raw)]) == packed.raw
    sizes = [d[3] for d in decode(frame).requests[0].inputs]  # type: ignore[union-attr]
    assert sizes == [small.nbytes, big.nbytes, swapped.nbytes, len(packed.raw)]


def test_without_sliced_writes_everything_is_written_at_once():
    big = np.arange(SLICED_WRITE_BYTES // 4 + 3, dtype=np.float32)
    arena = Arena(4 << 20)
    write_batch([request(object(), big)], arena)
    assert np.array_equal(np.frombuffer(arena.buf, np.float32, big.size, align(1)), big)
