"""Request decompression under a size limit, and Triton's Accept-Encoding choice."""

from __future__ import annotations

import gzip
import zlib

import pytest

from tritium.core.errors import InvalidArgument, Unsupported
from tritium.frontends.http.compression import (
    compress,
    decompress,
    request_encoding,
    response_encoding,
)


@pytest.mark.parametrize(
    "header,expected",
    [(None, None), ("", None), ("identity", None), ("gzip", "gzip"), ("Deflate", "deflate")],
)
def test_request_encoding(header, expected):
    assert request_encoding(header) == expected


def test_unknown_request_encoding_is_unsupported():
    with pytest.raises(Unsupported) as info:
        request_encoding("br")
    assert info.value.message == "Unsupported compression type"


def test_gzip_and_zlib_round_trip():
    data = b"x" * 1000
    assert decompress(gzip.compress(data), "gzip", 1000) == data
    assert decompress(zlib.compress(data), "deflate", 1000) == data
    assert decompress(compress(data, "gzip"), "gzip", 1000) == data
    assert gzip.decompress(compress(data, "gzip")) == data
    assert zlib.decompress(compress(data, "deflate")) == data


def test_decompressed_size_is_bounded_while_inflating():
    bomb = gzip.compress(b"\0" * 10_000_000)  # ~10 KB that inflates to 10 MB
    with pytest.raises(InvalidArgument) as info:
        decompress(bomb, "gzip", 1_000_000)
    assert "exceeds the maximum allowed value of 1000000 bytes" in info.value.message


@pytest.mark.parametrize(
    "payload",
    [b"garbage", gzip.compress(b"abc" * 100, mtime=0)[:-12]],
    ids=["garbage", "truncated"],
)
def test_corrupt_or_truncated_bodies(payload):
    with pytest.raises(InvalidArgument) as info:
        decompress(payload, "gzip", 10_000)
    assert info.value.message.startswith("failed to decompress the request body")


@pytest.mark.parametrize(
    "header,expected",
    [
        (None, None),
        ("gzip", "gzip"),
        ("deflate", "deflate"),
        ("br", None),
        ("identity", None),
        ("deflate;q=0.5, gzip;q=0.2", "deflate"),
        ("gzip;q=0.2, deflate;q=0.5", "deflate"),
        ("gzip;q=0, identity", None),
        ("gzip;q=abc, deflate", "deflate"),
        ("br, gzip", "gzip"),
    ],
)
def test_response_encoding_follows_triton(header, expected):
    assert response_encoding(header) == expected
