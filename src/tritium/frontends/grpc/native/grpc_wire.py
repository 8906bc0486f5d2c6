"""gRPC over HTTP/2 on the wire: length-prefixed messages, compression, deadlines,
status trailers (the "gRPC over HTTP2" protocol document).

Sans-IO and stateless except :class:`MessageReader`, which reassembles messages from
DATA payloads and enforces the size limit from the 5-byte prefix, before buffering.
"""

from __future__ import annotations

import struct
import zlib

from tritium.frontends.grpc.native.frames import header_block

# gRPC status codes used by the transport itself.
OK = 0
CANCELLED = 1
UNKNOWN = 2
INVALID_ARGUMENT = 3
DEADLINE_EXCEEDED = 4
RESOURCE_EXHAUSTED = 8
UNIMPLEMENTED = 12
INTERNAL = 13
UNAVAILABLE = 14

#: Encodings we decode and may answer with, in the order we advertise them.
ENCODINGS = ("identity", "deflate", "gzip")
ACCEPT_ENCODING = ",".join(ENCODINGS).encode()
#: ``--grpc-infer-response-compression-level`` → zlib level.
COMPRESSION_LEVELS = {"low": 1, "medium": 6, "high": 9}

_PREFIX = struct.Struct(">BL")
_TIMEOUT_UNITS = {"H": 3600.0, "M": 60.0, "S": 1.0, "m": 1e-3, "u": 1e-6, "n": 1e-9}
_WBITS = {"gzip": 31, "deflate": 15}


class WireError(Exception):
    """A call-level failure to answer with a gRPC status."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


# ------------------------------------------------------------------ messages


def message_prefix(length: int, compressed: bool = False) -> bytes:
    return _PREFIX.pack(1 if compressed else 0, length)


class MessageReader:
    """Reassembles length-prefixed messages from a request stream's DATA payloads."""

    __slots__ = ("max_length", "_buf", "_need")

    def __init__(self, max_length: int) -> None:
        self.max_length = max_length
        self._buf = bytearray()
        self._need = 5  # bytes that complete the held-back prefix or message

    @property
    def buffered(self) -> int:
        """Bytes of an incomplete message held back."""
        return len(self._buf)

    def feed(self, data: memoryview) -> list[tuple[int, memoryview]]:
        """Complete (compressed flag, message) pairs; the views are only valid until the
        next call. Raises :class:`WireError` (RESOURCE_EXHAUSTED) as soon as a prefix
        announces a message over the limit."""
        if self._buf:
            self._buf += data
            if len(self._buf) < self._need:
                return []
            data = memoryview(self._buf)
            self._buf = bytearray()
        out = []
        n = len(data)
        pos = 0
        unpack = _PREFIX.unpack_from
        while n - pos >= 5:
            flag, length = unpack(data, pos)
            if length > self.max_length:
                raise WireError(
                    RESOURCE_EXHAUSTED,
                    f"Received message larger than max ({length} vs. {self.max_length})",
                )
            end = pos + 5 + length
            if end > n:
                self._need = end - pos
                break
            out.append((flag, data[pos + 5 : end]))
            pos = end
        else:
            self._need = 5
        if pos < n:
            self._buf = bytearray(data[pos:])
        return out


# --------------------------------------------------------------- compression


def decompress(encoding: str, data: bytes | memoryview, max_length: int) -> bytes:
    """Inflate one message; a message that inflates past ``max_length`` is refused."""
    wbits = _WBITS.get(encoding)
    if wbits is None:
        raise WireError(INTERNAL, f"compressed message with encoding '{encoding}'")
    inflater = zlib.decompressobj(wbits)
    try:
        out = inflater.decompress(data, max_length + 1)
    except zlib.error as exc:
        raise WireError(INTERNAL, f"failed to decompress the message: {exc}") from None
    if len(out) > max_length or inflater.unconsumed_tail:
        raise WireError(
            RESOURCE_EXHAUSTED,
            f"Received message larger than max (more than {max_length} bytes decompressed)",
        )
    return out


def compress(encoding: str, data: bytes, level: int) -> bytes:
    deflater = zlib.compressobj(level, zlib.DEFLATED, _WBITS[encoding])
    return deflater.compress(data) + deflater.flush()


def response_encoding(accept: str | None, level: str) -> str | None:
    """The encoding for infer responses when compression is on and the client accepts
    it (None for identity). As grpc core does for Triton's levels: low prefers gzip,
    medium and high prefer deflate."""
    if level not in COMPRESSION_LEVELS or not accept:
        return None
    accepted = {part.strip() for part in accept.split(",")}
    preference = ("gzip", "deflate") if level == "low" else ("deflate", "gzip")
    for encoding in preference:
        if encoding in accepted:
            return encoding
    return None


# ------------------------------------------------------------------ deadlines


def parse_timeout(value: str) -> float | None:
    """Seconds of a ``grpc-timeout`` value (1–8 digits and a unit); None if malformed."""
    if not 2 <= len(value) <= 9 or not value[:-1].isdigit():
        return None
    unit = _TIMEOUT_UNITS.get(value[-1])
    return None if unit is None else int(value[:-1]) * unit


# --------------------------------------------------------------- status/trailers


def percent_encode(message: str) -> bytes:
    """``grpc-message`` encoding: printable ASCII except '%' stays, the rest is %XX."""
    raw = message.encode("utf-8", "replace")
    if all(0x20 <= b <= 0x7E and b != 0x25 for b in raw):
        return raw
    return b"".join(bytes((b,)) if 0x20 <= b <= 0x7E and b != 0x25 else b"%%%02X" % b for b in raw)


def percent_decode(value: str) -> str:
    """The inverse of :func:`percent_encode` (for clients and tests)."""
    raw = value.encode("latin-1")
    out = bytearray()
    i = 0
    while i < len(raw):
        if raw[i] == 0x25 and i + 2 < len(raw):
            try:
                out.append(int(raw[i + 1 : i + 3], 16))
                i += 3
                continue
            except ValueError:
                pass
        out.append(raw[i])
        i += 1
    return out.decode("utf-8", "replace")


_HEAD = [(b":status", b"200"), (b"content-type", b"application/grpc")]
_ACCEPT = [(b"grpc-accept-encoding", ACCEPT_ENCODING)]

#: Leading headers of a response, by response encoding (None: identity).
RESPONSE_HEAD: dict[str | None, bytes] = {
    None: header_block(_HEAD + _ACCEPT),
    "gzip": header_block(_HEAD + [(b"grpc-encoding", b"gzip")] + _ACCEPT),
    "deflate": header_block(_HEAD + [(b"grpc-encoding", b"deflate")] + _ACCEPT),
}
TRAILERS_OK = header_block([(b"grpc-status", b"0")])


def _status_fields(code: int, message: str) -> list[tuple[bytes, bytes]]:
    fields = [(b"grpc-status", str(code).encode())]
    if message:
        fields.append((b"grpc-message", percent_encode(message[:4096])))
    return fields


def trailers(code: int, message: str = "") -> bytes:
    """Trailers ending a response that sent its leading headers."""
    return (
        TRAILERS_OK if code == OK and not message else header_block(_status_fields(code, message))
    )


def trailers_only(code: int, message: str = "") -> bytes:
    """The single header block of a response that carries no message."""
    return header_block(_HEAD + _ACCEPT + _status_fields(code, message))


def http_error(status: int, code: int, message: str) -> bytes:
    """A non-200 answer for requests that are not gRPC (e.g. 415 for a wrong content-type)."""
    return header_block(
        [(b":status", str(status).encode()), (b"content-type", b"application/grpc")]
        + _status_fields(code, message)
    )
