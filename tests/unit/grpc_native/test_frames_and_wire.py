"""HTTP/2 frame bytes and gRPC wire helpers of the native transport, byte for byte."""

from __future__ import annotations

import gzip
import zlib

import pytest
from hpack import Decoder
from hyperframe.frame import ContinuationFrame, Frame, HeadersFrame

from tritium.frontends.grpc.native import frames as f
from tritium.frontends.grpc.native import grpc_wire as w


def _parse_frames(data: bytes) -> list[Frame]:
    out = []
    while data:
        frame, length = Frame.parse_frame_header(memoryview(data[:9]))
        frame.parse_body(memoryview(data[9 : 9 + length]))
        out.append(frame)
        data = data[9 + length :]
    return out


def test_header_block_decodes_and_leaves_the_peer_table_empty():
    block = f.header_block(
        [(b":status", b"200"), (b"content-type", b"application/grpc"), (b"x-long", b"v" * 300)]
    )
    decoder = Decoder()
    assert decoder.decode(block) == [
        (":status", "200"),
        ("content-type", "application/grpc"),
        ("x-long", "v" * 300),
    ]
    # Nothing was inserted, so the same bytes may be sent again on any connection.
    assert len(decoder.header_table.dynamic_entries) == 0
    assert decoder.decode(block)[2] == ("x-long", "v" * 300)


def test_large_header_blocks_are_split_into_continuation_frames():
    block = f.header_block([(b"x-big", b"a" * 40_000)])
    frames = _parse_frames(f.headers_frames(3, block, True, 16_384))
    assert isinstance(frames[0], HeadersFrame)
    assert all(isinstance(fr, ContinuationFrame) for fr in frames[1:])
    assert "END_STREAM" in frames[0].flags and "END_HEADERS" not in frames[0].flags
    assert "END_HEADERS" in frames[-1].flags
    assert all(len(fr.data) <= 16_384 for fr in frames)
    assert b"".join(fr.data for fr in frames) == block
    assert {fr.stream_id for fr in frames} == {3}


def test_control_frames():
    frames = _parse_frames(
        f.settings_frame({f.SETTINGS_MAX_CONCURRENT_STREAMS: 7})
        + f.ping_frame(b"12345678", ack=True)
        + f.window_update_frame(5, 1000)
        + f.rst_stream_frame(5, f.CANCEL)
        + f.goaway_frame(9, f.PROTOCOL_ERROR, b"why")
    )
    settings, ping, window, rst, goaway = frames
    assert settings.settings == {f.SETTINGS_MAX_CONCURRENT_STREAMS: 7}
    assert ping.opaque_data == b"12345678" and "ACK" in ping.flags
    assert (window.stream_id, window.window_increment) == (5, 1000)
    assert (rst.stream_id, rst.error_code) == (5, f.CANCEL)
    assert (goaway.last_stream_id, goaway.error_code, goaway.additional_data) == (
        9,
        f.PROTOCOL_ERROR,
        b"why",
    )


# ------------------------------------------------------------------ gRPC wire


def _messages(*payloads: bytes) -> bytes:
    return b"".join(w.message_prefix(len(p)) + p for p in payloads)


def test_message_reader_reassembles_any_split():
    wire = _messages(b"hello", b"", b"x" * 1000)
    for step in (1, 2, 3, 7, 64, len(wire)):
        reader = w.MessageReader(10_000)
        got = []
        for i in range(0, len(wire), step):
            got += [(flag, bytes(m)) for flag, m in reader.feed(memoryview(wire[i : i + step]))]
        assert got == [(0, b"hello"), (0, b""), (0, b"x" * 1000)], step
        assert reader.buffered == 0


def test_message_reader_refuses_an_oversized_message_from_its_prefix_alone():
    reader = w.MessageReader(100)
    with pytest.raises(w.WireError) as info:
        reader.feed(memoryview(w.message_prefix(101)))  # no payload buffered yet
    assert info.value.code == w.RESOURCE_EXHAUSTED
    assert "101 vs. 100" in info.value.message


@pytest.mark.parametrize("encoding", ["gzip", "deflate"])
def test_compression_round_trip_and_limits(encoding):
    data = b"tritium " * 1000
    packed = w.compress(encoding, data, 6)
    assert w.decompress(encoding, packed, len(data)) == data
    if encoding == "gzip":
        assert gzip.decompress(packed) == data
    else:
        assert zlib.decompress(packed) == data
    with pytest.raises(w.WireError) as info:
        w.decompress(encoding, packed, len(data) - 1)  # a bomb is stopped at the limit
    assert info.value.code == w.RESOURCE_EXHAUSTED
    with pytest.raises(w.WireError):
        w.decompress(encoding, b"not compressed", 100)


def test_response_encoding_follows_level_and_client_accept():
    assert w.response_encoding("identity,deflate,gzip", "none") is None
    assert w.response_encoding("identity,deflate,gzip", "high") == "deflate"
    assert w.response_encoding("identity,deflate,gzip", "medium") == "deflate"
    assert w.response_encoding("identity,deflate,gzip", "low") == "gzip"
    assert w.response_encoding("identity, deflate", "low") == "deflate"
    assert w.response_encoding("identity,gzip", "high") == "gzip"
    assert w.response_encoding("identity", "medium") is None
    assert w.response_encoding(None, "medium") is None


@pytest.mark.parametrize(
    ("value", "seconds"),
    [
        ("1H", 3600.0),
        ("2M", 120.0),
        ("3S", 3.0),
        ("250m", 0.25),
        ("5u", 5e-6),
        ("99999999n", 0.099999999),
    ],
)
def test_grpc_timeout_units(value, seconds):
    assert w.parse_timeout(value) == pytest.approx(seconds)


@pytest.mark.parametrize("value", ["", "S", "1", "123456789S", "1x", "-1S", "1.5S"])
def test_malformed_grpc_timeout_is_ignored(value):
    assert w.parse_timeout(value) is None


def test_grpc_message_is_percent_encoded():
    assert w.percent_encode("plain text: ok") == b"plain text: ok"
    encoded = w.percent_encode("50% über\nline")
    assert encoded == b"50%25 %C3%BCber%0Aline"
    assert w.percent_decode(encoded.decode()) == "50% über\nline"


def test_status_blocks():
    decoder = Decoder()
    assert decoder.decode(w.TRAILERS_OK) == [("grpc-status", "0")]
    assert dict(decoder.decode(w.trailers_only(w.UNIMPLEMENTED, "no 100%"))) == {
        ":status": "200",
        "content-type": "application/grpc",
        "grpc-accept-encoding": "identity,deflate,gzip",
        "grpc-status": "12",
        "grpc-message": "no 100%25",
    }
    assert dict(decoder.decode(w.RESPONSE_HEAD["gzip"]))["grpc-encoding"] == "gzip"
    assert dict(decoder.decode(w.http_error(415, w.UNKNOWN, "bad")))[":status"] == "415"
