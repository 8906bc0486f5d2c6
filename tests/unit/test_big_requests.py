"""Big but legal requests stay cheap: BYTES elements cost tens of bytes, not hundreds,
on the way in; an HTTP/2 header block is capped before its (pure-Python) HPACK decoding.

Numbers asserted here are stable ones (memory, sizes); the time other clients wait while
a big request is handled is measured by ``bench/big_requests.py``.
"""

from __future__ import annotations

import tracemalloc

import numpy as np

from tritium.core.datatypes import deserialize_bytes, pack_bytes, serialize_bytes
from tritium.frontends.grpc.native import frames as f
from tritium.frontends.grpc.native.connection import H2Connection
from tritium.frontends.grpc.native.server import MAX_HEADER_BLOCK
from tritium.ipc import tensors as ipc_tensors

ELEMENTS = 1_000_000


def _peak(fn, *args):  # noqa: ANN001, ANN202
    tracemalloc.start()
    try:
        result = fn(*args)
        return result, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_empty_bytes_elements_cost_at_most_a_slot_each():
    wire = b"\0\0\0\0" * ELEMENTS
    array, peak = _peak(deserialize_bytes, wire, ELEMENTS)
    assert array.shape == (ELEMENTS,) and array[0] == b"" and array[-1] == b""
    # Was ~250 B per element (a bytes object, a memoryview and a list slot each).
    assert peak / ELEMENTS <= 12, f"{peak / ELEMENTS:.1f} bytes per element"
    assert serialize_bytes(array) == wire


def test_binary_bytes_inputs_reach_the_arena_without_a_python_object_each():
    # What the frontends keep of a binary BYTES input, and what the arena writer then
    # asks of it: the wire's own bytes, checked once (~1 byte per element, for numpy's
    # comparison of the length prefixes), never decoded nor serialized again.
    wire = b"\0\0\0\0" * ELEMENTS
    packed, peak = _peak(pack_bytes, wire, ELEMENTS, (ELEMENTS,), "TEXT", "m")
    assert peak / ELEMENTS <= 2, f"{peak / ELEMENTS:.1f} bytes per element"
    (size, raw), peak = _peak(ipc_tensors.encoded_size, "BYTES", packed)
    assert raw is wire and size == len(wire)
    assert peak < 4096, f"{peak} bytes to size the arena write"


def test_small_bytes_elements_cost_tens_of_bytes():
    wire = b"\3\0\0\0abc" * ELEMENTS
    array, peak = _peak(deserialize_bytes, wire, ELEMENTS)
    assert array[12345] == b"abc"
    assert peak / ELEMENTS <= 64, f"{peak / ELEMENTS:.1f} bytes per element"
    assert serialize_bytes(array) == wire


def test_mixed_lengths_keep_their_bytes_exactly():
    items = [b"", b"a", b"\0\0", b"xyz\0", b""] * 1000
    wire = b"".join(len(i).to_bytes(4, "little") + i for i in items)
    array = deserialize_bytes(wire, len(items))
    assert array.tolist() == items
    assert serialize_bytes(array) == wire
    assert serialize_bytes(np.array(["é", 7, b"b"], dtype=object)) == (
        b"\2\0\0\0\xc3\xa9\1\0\0\0007\1\0\0\0b"
    )


class _Handler:
    def stream_opened(self, stream, headers):  # noqa: ANN001, ANN201
        raise AssertionError("a too-large header block must not open a stream")


def test_header_block_over_the_cap_closes_the_connection_before_decoding():
    connection = H2Connection(_Handler(), max_header_block=MAX_HEADER_BLOCK)
    connection.initiate()
    chunk = b"\0" * 16_000
    frames = [f.frame(f.HEADERS, 0, 1, chunk)]
    for _ in range(MAX_HEADER_BLOCK // len(chunk)):
        frames.append(f.frame(f.CONTINUATION, 0, 1, chunk))
    frames.append(f.frame(f.CONTINUATION, f.END_HEADERS, 1, chunk))
    connection.receive(f.PREFACE + f.settings_frame({}) + b"".join(frames))
    assert connection.closed
    sent = bytes(connection.data_to_send())
    goaways = []
    while len(sent) >= 9:
        length = int.from_bytes(sent[:3], "big")
        if sent[3] == f.GOAWAY:
            goaways.append(int.from_bytes(sent[13:17], "big"))  # after last-stream-id
        sent = sent[9 + length :]
    assert goaways == [f.ENHANCE_YOUR_CALM]
    assert 64 * 1024 <= MAX_HEADER_BLOCK <= 96 * 1024
