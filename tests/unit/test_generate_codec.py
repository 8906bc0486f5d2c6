"""Triton's generate extension mapping (sans-IO) and the SSE event stream object."""

from __future__ import annotations

import numpy as np
import orjson
import pytest

from tritium.core import InferResponse, OutputTensor
from tritium.core.errors import InvalidArgument
from tritium.frontends.http.event_stream import MAX_UNSENT_BYTES, EventStream
from tritium.frontends.http.generate_codec import (
    decode_generate_request,
    generate_response_json,
    sse_event,
)

CONFIG = {
    "max_batch_size": 0,
    "input": [
        {"name": "text_input", "data_type": "TYPE_STRING", "dims": [1]},
        {"name": "ids", "data_type": "TYPE_INT32", "dims": [-1, 2]},
    ],
}


def test_named_fields_become_inputs_and_the_rest_parameters() -> None:
    body = orjson.dumps(
        {
            "id": "42",
            "text_input": "hi",
            "ids": [[1, 2], [3, 4]],
            "parameters": {"temperature": 0.5, "stream": False},
            "max_tokens": 8,
        }
    )
    request = decode_generate_request("m", "", body, CONFIG)
    assert request.id == "42"
    assert request.parameters == {"temperature": 0.5, "stream": False, "max_tokens": 8}
    text, ids = request.inputs
    assert (text.name, text.datatype, text.shape) == ("text_input", "BYTES", (1,))
    assert text.data.tolist() == [b"hi"]
    assert (ids.datatype, ids.shape) == ("INT32", (2, 2))
    np.testing.assert_array_equal(ids.data, [[1, 2], [3, 4]])


def test_a_batching_model_gets_a_batch_dimension() -> None:
    config = {**CONFIG, "max_batch_size": 4}
    request = decode_generate_request("m", "", b'{"text_input": "a"}', config)
    assert request.inputs[0].shape == (1, 1)


@pytest.mark.parametrize(
    "body",
    [b"[1]", b"{", b'{"parameters": [1]}', b'{"nested": {"a": 1}}', b'{"ids": "x"}'],
)
def test_bad_bodies_are_invalid_arguments(body: bytes) -> None:
    with pytest.raises(InvalidArgument):
        decode_generate_request("m", "", body, CONFIG)


def test_response_fields() -> None:
    response = InferResponse("m", "1", "id")
    response.outputs = [
        OutputTensor("text_output", "BYTES", (1,), np.array([b"yes"], dtype=np.object_)),
        OutputTensor("scores", "FP32", (2,), np.array([0.5, 1.5], dtype=np.float32)),
    ]
    assert orjson.loads(generate_response_json(response, "7")) == {
        "id": "7",
        "model_name": "m",
        "model_version": "1",
        "text_output": "yes",
        "scores": [0.5, 1.5],
    }
    assert "id" not in orjson.loads(generate_response_json(response, ""))
    assert sse_event(b'{"a":1}') == b'data: {"a":1}\n\n'


def test_event_stream_buffers_until_attached_then_writes_through() -> None:
    stream = EventStream()
    stream.send(b"one")
    written: list[bytes] = []
    ended: list[bool] = []
    stream.attach(lambda d: written.append(d) or True, lambda: ended.append(True))
    stream.send(b"two")
    stream.end()
    stream.send(b"late")
    assert written == [b"one", b"two"] and ended == [True]


def test_event_stream_cancels_a_reader_that_falls_behind() -> None:
    stream = EventStream()
    cancelled: list[str] = []
    stream.on_cancel = lambda: cancelled.append("work")
    stream.on_abort = lambda: cancelled.append("connection")
    chunk = b"x" * (1 << 20)
    for _ in range(MAX_UNSENT_BYTES // len(chunk) + 1):
        stream.send(chunk)
    assert stream.closed and cancelled == ["work", "connection"]
    stream.cancel()
    assert cancelled == ["work", "connection"]


def test_event_stream_cancels_when_the_writer_refuses() -> None:
    stream = EventStream()
    cancelled: list[bool] = []
    stream.on_cancel = lambda: cancelled.append(True)
    stream.attach(lambda d: False, lambda: None)
    stream.send(b"data")
    assert cancelled == [True] and stream.closed
