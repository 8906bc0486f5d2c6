"""Body compression for infer requests and responses, as Triton's HTTP endpoint does it.

Requests may be ``Content-Encoding: gzip`` or ``deflate`` (zlib stream); the
decompressed size is bounded by the input-size limit while inflating, so a small
compressed body cannot expand past it. Responses are compressed when
``Accept-Encoding`` prefers gzip or deflate (Triton's selection: highest q wins,
identity when none is acceptable).
"""

from __future__ import annotations

import zlib

from tritium.core.errors import InvalidArgument, Unsupported

# zlib window bits: 31 = gzip wrapper, 15 = zlib wrapper ("deflate" on the web).
_WBITS = {"gzip": 31, "deflate": 15}


def too_large_message(size: int | None, limit: int) -> str:
    what = f"Request body size of {size} bytes" if size is not None else "Request body size"
    return (
        f"{what} exceeds the maximum allowed value of {limit} bytes. "
        "Use --http-max-input-size to increase the limit."
    )


def request_encoding(content_encoding: str | None) -> str | None:
    """The compression of a request body: "gzip", "deflate" or None (identity)."""
    if not content_encoding:
        return None
    value = content_encoding.strip().lower()
    if value in _WBITS:
        return value
    if value == "identity" or not value:
        return None
    raise Unsupported("Unsupported compression type")


def decompress(body: bytes, encoding: str, limit: int) -> bytes:
    """Inflate ``body``; InvalidArgument when corrupt or larger than ``limit`` bytes."""
    inflater = zlib.decompressobj(_WBITS[encoding])
    try:
        out = inflater.decompress(body, limit + 1)
    except zlib.error as exc:
        raise InvalidArgument(f"failed to decompress the request body: {exc}") from None
    if len(out) > limit or inflater.unconsumed_tail:
        raise InvalidArgument(too_large_message(None, limit))
    if not inflater.eof:
        raise InvalidArgument("failed to decompress the request body: truncated data")
    return out


def response_encoding(accept_encoding: str | None) -> str | None:
    """Triton's choice from ``Accept-Encoding``: "gzip", "deflate" or None."""
    if not accept_encoding:
        return None
    best = "identity"
    weight = 0.0
    for item in accept_encoding.split(","):
        name, _, q = item.strip().partition(";q=")
        name = name.strip()
        if not name:
            continue
        try:
            w = float(q) if q else 1.0
        except ValueError:
            continue
        if name in ("identity", "gzip", "deflate") and w > weight:
            best, weight = name, w
    return None if best == "identity" else best


def compress(body: bytes, encoding: str) -> bytes:
    packer = zlib.compressobj(6, zlib.DEFLATED, _WBITS[encoding])
    return packer.compress(body) + packer.flush()
