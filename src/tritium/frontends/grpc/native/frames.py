"""HTTP/2 frames as bytes (RFC 9113 §4, §6): constants, encoders and a header-block
encoder that never touches HPACK's dynamic table.

Sans-IO: nothing here knows about sockets or streams' state. Response header blocks use
only static-table indexes and "literal never indexed" fields, so encoding them leaves
the peer's decoder table unchanged and the same block bytes can be reused for every
response.
"""

from __future__ import annotations

import struct

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"

# Frame types.
DATA = 0x0
HEADERS = 0x1
PRIORITY = 0x2
RST_STREAM = 0x3
SETTINGS = 0x4
PUSH_PROMISE = 0x5
PING = 0x6
GOAWAY = 0x7
WINDOW_UPDATE = 0x8
CONTINUATION = 0x9

# Flags.
END_STREAM = 0x1
ACK = 0x1
END_HEADERS = 0x4
PADDED = 0x8
PRIORITY_FLAG = 0x20

# Error codes.
NO_ERROR = 0x0
PROTOCOL_ERROR = 0x1
INTERNAL_ERROR = 0x2
FLOW_CONTROL_ERROR = 0x3
SETTINGS_TIMEOUT = 0x4
STREAM_CLOSED = 0x5
FRAME_SIZE_ERROR = 0x6
REFUSED_STREAM = 0x7
CANCEL = 0x8
COMPRESSION_ERROR = 0x9
CONNECT_ERROR = 0xA
ENHANCE_YOUR_CALM = 0xB
INADEQUATE_SECURITY = 0xC
HTTP_1_1_REQUIRED = 0xD

# Settings.
SETTINGS_HEADER_TABLE_SIZE = 0x1
SETTINGS_ENABLE_PUSH = 0x2
SETTINGS_MAX_CONCURRENT_STREAMS = 0x3
SETTINGS_INITIAL_WINDOW_SIZE = 0x4
SETTINGS_MAX_FRAME_SIZE = 0x5
SETTINGS_MAX_HEADER_LIST_SIZE = 0x6

DEFAULT_WINDOW = 65_535
DEFAULT_MAX_FRAME_SIZE = 16_384
MAX_MAX_FRAME_SIZE = 2**24 - 1
MAX_WINDOW = 2**31 - 1

HEADER = struct.Struct(">HBBBL")  # 24-bit length as (high 16, low 8), type, flags, stream
_U32 = struct.Struct(">L")
_U32x2 = struct.Struct(">LL")
_SETTING = struct.Struct(">HL")


def frame_header(length: int, kind: int, flags: int, stream_id: int) -> bytes:
    """The 9-byte header of one frame."""
    return HEADER.pack(length >> 8, length & 0xFF, kind, flags, stream_id)


def frame(kind: int, flags: int, stream_id: int, payload: bytes = b"") -> bytes:
    """One whole frame (header and payload)."""
    return HEADER.pack(len(payload) >> 8, len(payload) & 0xFF, kind, flags, stream_id) + payload


def settings_frame(settings: dict[int, int]) -> bytes:
    payload = b"".join(_SETTING.pack(k, v) for k, v in settings.items())
    return frame(SETTINGS, 0, 0, payload)


SETTINGS_ACK = frame(SETTINGS, ACK, 0)


def parse_settings(payload: bytes | memoryview) -> list[tuple[int, int]]:
    """(identifier, value) pairs of a SETTINGS payload (its length is a multiple of 6)."""
    return [_SETTING.unpack_from(payload, i) for i in range(0, len(payload), 6)]


def ping_frame(opaque: bytes, ack: bool = False) -> bytes:
    return frame(PING, ACK if ack else 0, 0, opaque)


def window_update_frame(stream_id: int, increment: int) -> bytes:
    return frame(WINDOW_UPDATE, 0, stream_id, _U32.pack(increment))


def rst_stream_frame(stream_id: int, code: int) -> bytes:
    return frame(RST_STREAM, 0, stream_id, _U32.pack(code))


def goaway_frame(last_stream_id: int, code: int, debug: bytes = b"") -> bytes:
    return frame(GOAWAY, 0, 0, _U32x2.pack(last_stream_id, code) + debug)


def unpack_u32(payload: bytes | memoryview) -> int:
    return _U32.unpack_from(payload)[0]


def unpack_goaway(payload: bytes | memoryview) -> tuple[int, int]:
    last, code = _U32x2.unpack_from(payload)
    return last & MAX_WINDOW, code


def headers_frames(stream_id: int, block: bytes, end_stream: bool, max_frame_size: int) -> bytes:
    """HEADERS (+ CONTINUATION frames when ``block`` exceeds the peer's frame size)."""
    flags = END_STREAM if end_stream else 0
    if len(block) <= max_frame_size:
        return frame_header(len(block), HEADERS, flags | END_HEADERS, stream_id) + block
    chunks = [block[i : i + max_frame_size] for i in range(0, len(block), max_frame_size)]
    out = [frame_header(len(chunks[0]), HEADERS, flags, stream_id), chunks[0]]
    for i, chunk in enumerate(chunks[1:], 2):
        last = END_HEADERS if i == len(chunks) else 0
        out += (frame_header(len(chunk), CONTINUATION, last, stream_id), chunk)
    return b"".join(out)


# ------------------------------------------------------------------ HPACK out


def _hpack_int(value: int, prefix_bits: int, first: int) -> bytes:
    limit = (1 << prefix_bits) - 1
    if value < limit:
        return bytes((first | value,))
    out = bytearray((first | limit,))
    value -= limit
    while value >= 128:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def literal_field(name: bytes, value: bytes) -> bytes:
    """One "literal never indexed, new name" field (RFC 7541 §6.2.3), no Huffman coding."""
    return b"".join(
        (b"\x10", _hpack_int(len(name), 7, 0), name, _hpack_int(len(value), 7, 0), value)
    )


def header_block(headers: list[tuple[bytes, bytes]]) -> bytes:
    """A header block that needs no encoder state: ``:status 200`` uses its static index,
    everything else is a literal that is never indexed."""
    out = []
    for name, value in headers:
        if name == b":status" and value == b"200":
            out.append(b"\x88")
        else:
            out.append(literal_field(name, value))
    return b"".join(out)
