"""Property-based fuzzing of the sans-IO parsers (hypothesis).

Each target is run twice: a short run in the default suite (``SHORT`` examples, about a
second or two each) and a long run behind ``-m "fuzz and slow"`` (``TRITIUM_FUZZ_EXAMPLES``
examples, 20,000 by default). The property is always the same: hostile bytes end in the
parser's documented error (a core error, a protocol failure, a protobuf DecodeError), never
in another exception, a hang, or a write after close; and where a second, independent
path exists (protobuf's parser, serialize/deserialize), both agree. Every crash found here
becomes a named regression test in the module of the code it broke.
"""

from __future__ import annotations

import asyncio
import gzip
import json
import os
import struct
from collections.abc import Callable

import numpy as np
import pytest
from google.protobuf.message import DecodeError
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.unit.test_http_protocol import IdentityService
from tritonclient.grpc import service_pb2

from tritium.core.datatypes import deserialize_bytes, serialize_bytes
from tritium.core.errors import InvalidArgument, TritiumError
from tritium.frontends.grpc.infer_codec import decode_infer_request as grpc_decode
from tritium.frontends.grpc.infer_plans import RequestPlans
from tritium.frontends.grpc.native import frames as f
from tritium.frontends.grpc.native.connection import H2Connection
from tritium.frontends.grpc.native.header_blocks import HeaderBlockDecoder, HeaderBlockError
from tritium.frontends.http.handlers import KServeRoutes
from tritium.frontends.http.infer_decode import decode_infer_request, parse_header_length
from tritium.frontends.http.protocol import HttpProtocol
from tritium.frontends.http.router import Router
from tritium.testing.fakes import FakeTransport

SHORT = 150
LONG = int(os.environ.get("TRITIUM_FUZZ_EXAMPLES", "20000"))
_COMMON = {
    "deadline": None,
    "database": None,
    "suppress_health_check": [HealthCheck.too_slow, HealthCheck.data_too_large],
}


def fuzz(*strategies: st.SearchStrategy) -> Callable:
    """``test_x, test_x_long = fuzz(strategy...)(body)``: the short and the long run."""

    def wrap(body: Callable) -> tuple[Callable, Callable]:
        short = settings(max_examples=SHORT, **_COMMON)(given(*strategies)(body))
        long = settings(max_examples=LONG, **_COMMON)(given(*strategies)(body))
        return short, pytest.mark.slow(pytest.mark.fuzz(long))

    return wrap


DATATYPES = ["BOOL", "UINT8", "INT8", "INT16", "INT32", "INT64", "FP16", "FP32", "FP64", "BYTES"]
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4)
    ),
    max_leaves=20,
)
shapes = st.lists(st.integers(min_value=-2, max_value=6), max_size=3)
inputs = st.fixed_dictionaries(
    {"name": st.sampled_from(["IN", "INPUT0", ""]), "datatype": st.sampled_from(DATATYPES + ["X"])},
    optional={
        "shape": shapes | json_values,
        "data": json_values | st.lists(st.integers(-300, 300), max_size=8),
        "parameters": st.dictionaries(
            st.sampled_from(["binary_data_size", "shared_memory_region", "x"]),
            st.integers(-1, 64) | json_values,
            max_size=2,
        ),
    },
)
infer_docs = st.fixed_dictionaries(
    {},
    optional={
        "id": json_values,
        "inputs": st.lists(inputs, max_size=3) | json_values,
        "outputs": st.lists(
            st.fixed_dictionaries(
                {"name": st.text(max_size=4)}, optional={"parameters": json_values}
            ),
            max_size=2,
        )
        | json_values,
        "parameters": st.dictionaries(st.text(max_size=12), json_values, max_size=3),
    },
)


# ---------------------------------------------------------------- HTTP/1.1 heads and bodies


def _serve(chunks: list[bytes]) -> FakeTransport:
    async def scenario() -> FakeTransport:
        router = Router()
        KServeRoutes(IdentityService(), 1 << 16).register(router)
        protocol = HttpProtocol(router, set(), max_input_size=1 << 16)
        transport = FakeTransport()
        protocol.connection_made(transport)
        for chunk in chunks:
            protocol.data_received(chunk)  # FakeTransport asserts: no write after close
            for _ in range(3):
                await asyncio.sleep(0)
        protocol.connection_lost(None)
        return transport

    return asyncio.run(scenario())


def _check_answers(data: bytes) -> None:
    while data:
        assert data.startswith(b"HTTP/1."), data[:40]
        head, sep, data = data.partition(b"\r\n\r\n")
        assert sep
        length = 0
        for line in head.split(b"\r\n")[1:]:
            name, _, value = line.partition(b": ")
            if name.lower() == b"content-length":
                length = int(value)
        data = data[length:]


request_lines = st.sampled_from(
    [
        b"GET /v2/health/live HTTP/1.1\r\n",
        b"GET /v2/models/ident/ready HTTP/1.0\r\n",
        b"POST /v2/models/ident/infer HTTP/1.1\r\n",
        b"GET /v2/health/live\r\n",
        b"PUT /v2 HTTP/1.1\r\n",
        b"GET http://x/v2?a=b HTTP/1.1\r\n",
    ]
)
header_lines = st.lists(
    st.sampled_from(
        [
            b"Host: x\r\n",
            b"Content-Length: 5\r\n",
            b"Content-Length: -1\r\n",
            b"Transfer-Encoding: chunked\r\n",
            b"Content-Encoding: gzip\r\n",
            b"Connection: close\r\n",
            b"Expect: 100-continue\r\n",
            b"Inference-Header-Content-Length: 3\r\n",
            b"Upgrade: h2c\r\nConnection: upgrade\r\n",
        ]
    )
    | st.binary(max_size=20).map(lambda b: b + b"\r\n"),
    max_size=5,
)
http_messages = st.tuples(request_lines, header_lines, st.binary(max_size=40)).map(
    lambda parts: parts[0] + b"".join(parts[1]) + b"\r\n" + parts[2]
)


def _split(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(data) + 1) for c in cuts})
    pieces, last = [], 0
    for point in points:
        pieces.append(data[last:point])
        last = point
    pieces.append(data[last:])
    return [p for p in pieces if p]


def _infer_post(parts: tuple[dict, bytes, int, bool]) -> bytes:
    doc, tail, header_cut, gzip_it = parts
    header = json.dumps(doc).encode()
    body = header + tail
    extra = f"Inference-Header-Content-Length: {min(header_cut, len(header))}\r\n"
    if gzip_it:
        body = gzip.compress(body)
        extra += "Content-Encoding: gzip\r\n"
    head = f"POST /v2/models/ident/infer HTTP/1.1\r\nHost: x\r\n{extra}"
    return f"{head}Content-Length: {len(body)}\r\n\r\n".encode() + body


infer_posts = st.tuples(infer_docs, st.binary(max_size=32), st.integers(0, 400), st.booleans()).map(
    _infer_post
)


@fuzz(
    st.lists(http_messages | infer_posts | st.binary(max_size=60), min_size=1, max_size=4),
    st.lists(st.integers(0, 400), max_size=6),
)
def _http_stream(messages: list[bytes], cuts: list[int]) -> None:
    _check_answers(bytes(_serve(_split(b"".join(messages), cuts)).data))


test_http_stream_fuzz, test_http_stream_fuzz_long = _http_stream


# ---------------------------------------------------------------- JSON and binary bodies


def _decode_http(body: bytes, header_length: int) -> None:
    try:
        decode_infer_request("m", "", body, header_length)
    except TritiumError:
        pass


@fuzz(infer_docs)
def _json_body(doc: dict) -> None:
    body = json.dumps(doc).encode()  # big ints and NaN too, which orjson refuses to write
    _decode_http(body, len(body))


test_json_infer_body_fuzz, test_json_infer_body_fuzz_long = _json_body


@fuzz(infer_docs, st.binary(max_size=64), st.integers(0, 200))
def _binary_body(doc: dict, tail: bytes, cut: int) -> None:
    header = json.dumps(doc).encode()
    body = header + tail
    # The declared header length is anything parse_header_length accepts for the body.
    for declared in (str(len(header)), str(cut)):
        try:
            length = parse_header_length(declared, len(body))
        except InvalidArgument:
            continue
        if length:
            _decode_http(body, length)


test_binary_infer_body_fuzz, test_binary_infer_body_fuzz_long = _binary_body


@fuzz(st.text(max_size=25), st.integers(0, 1 << 20))
def _header_length(value: str, body_length: int) -> None:
    try:
        length = parse_header_length(value, body_length)
    except InvalidArgument:
        return
    assert 0 <= length <= body_length


test_header_length_fuzz, test_header_length_fuzz_long = _header_length


# ---------------------------------------------------------------- BYTES length prefixes


@fuzz(st.binary(max_size=80), st.none() | st.integers(0, 8))
def _bytes_prefixes(raw: bytes, count: int | None) -> None:
    try:
        items = deserialize_bytes(raw, count, "IN", "m")
    except InvalidArgument:
        return
    assert serialize_bytes(items) == raw  # nothing skipped, nothing invented


test_bytes_prefix_fuzz, test_bytes_prefix_fuzz_long = _bytes_prefixes


@fuzz(st.lists(st.binary(max_size=20), max_size=10))
def _bytes_round_trip(items: list[bytes]) -> None:
    array = np.empty(len(items), dtype=np.object_)
    array[:] = items
    assert deserialize_bytes(serialize_bytes(array), len(items)).tolist() == items


test_bytes_round_trip_fuzz, test_bytes_round_trip_fuzz_long = _bytes_round_trip


# ---------------------------------------------------------------- HTTP/2 frames and HPACK


class _Handler:
    def stream_opened(self, stream, headers):  # noqa: ANN001, ANN201
        return self

    def on_data(self, data, end_stream):  # noqa: ANN001, ANN201
        pass

    def on_reset(self):  # noqa: ANN201
        pass


frame_bytes = st.tuples(
    st.sampled_from(range(11)), st.integers(0, 255), st.integers(0, 9), st.binary(max_size=40)
).map(
    lambda t: (
        struct.pack(">I", len(t[3]))[1:] + bytes([t[0], t[1]]) + struct.pack(">I", t[2]) + t[3]
    )
)


@fuzz(
    st.lists(frame_bytes | st.binary(max_size=30), max_size=8),
    st.lists(st.integers(0, 300), max_size=5),
)
def _h2_frames(frames: list[bytes], cuts: list[int]) -> None:
    connection = H2Connection(_Handler(), max_header_block=4096)
    connection.initiate()
    data = f.PREFACE + f.settings_frame({}) + b"".join(frames)
    for piece in _split(data, cuts):
        connection.receive(piece)  # a protocol error closes the connection, never raises
    connection.data_to_send()


test_h2_frames_fuzz, test_h2_frames_fuzz_long = _h2_frames


@fuzz(st.lists(st.binary(max_size=60), min_size=1, max_size=4))
def _hpack_blocks(blocks: list[bytes]) -> None:
    decoder = HeaderBlockDecoder(4096)
    for block in blocks:
        try:
            headers = decoder.decode(block)
        except HeaderBlockError:
            return
        assert all(isinstance(n, str) and isinstance(v, str) for n, v in headers)


test_hpack_fuzz, test_hpack_fuzz_long = _hpack_blocks


# ---------------------------------------------------------------- gRPC request plans


def _decoded(data: bytes, plans: RequestPlans) -> tuple[str, object]:
    try:
        request = plans.decode(data)
    except DecodeError:
        return ("decode-error", None)
    except TritiumError as exc:
        return ("error", exc.message)
    return ("ok", (request.id, [(t.name, t.datatype, t.shape) for t in request.inputs]))


def _reference(data: bytes) -> tuple[str, object]:
    try:
        request = grpc_decode(service_pb2.ModelInferRequest.FromString(data))
    except DecodeError:
        return ("decode-error", None)
    except TritiumError as exc:
        return ("error", exc.message)
    return ("ok", (request.id, [(t.name, t.datatype, t.shape) for t in request.inputs]))


grpc_inputs = st.lists(
    st.tuples(
        st.sampled_from(["IN", "INPUT0"]),
        st.sampled_from(DATATYPES),
        st.lists(st.integers(-1, 4), max_size=3),
        st.binary(max_size=24),
    ),
    max_size=3,
)


def _message(request_id: str, tensors: list) -> bytes:
    message = service_pb2.ModelInferRequest(model_name="m", id=request_id)
    for name, datatype, shape, raw in tensors:
        message.inputs.add(name=name, datatype=datatype, shape=shape)
        message.raw_input_contents.append(raw)
    return message.SerializeToString()


@fuzz(
    st.text(max_size=6),
    grpc_inputs,
    st.lists(st.tuples(st.integers(0, 200), st.integers(0, 255)), max_size=3),
)
def _grpc_plans(request_id: str, tensors: list, flips: list) -> None:
    data = bytearray(_message(request_id, tensors))
    for position, value in flips:
        if data:
            data[position % len(data)] = value
    plans = RequestPlans()
    # The plan path (twice: cold, then warm) answers exactly as protobuf's parser does.
    expected = _reference(bytes(data))
    assert _decoded(bytes(data), plans) == expected
    assert _decoded(bytes(data), plans) == expected


test_grpc_plans_fuzz, test_grpc_plans_fuzz_long = _grpc_plans
