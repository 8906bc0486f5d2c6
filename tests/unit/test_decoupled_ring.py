"""Decoupled responses through the worker's ring, both ends in one process: the
worker's ``ResponseStream`` writes, the server's ``ResponseStreams`` reads (a
socketpair carries new rings' descriptors, as between the two processes)."""

from __future__ import annotations

import socket

import numpy as np
import pytest

from tritium.backends.python import pb_utils
from tritium.backends.python.response_sender import ResponseSender, ResponseStream
from tritium.core import InferRequest
from tritium.core.errors import Unavailable
from tritium.ipc import Arena
from tritium.ipc.messages import decode_to_server, encode
from tritium.workers.response_streams import MAX_OPEN, ResponseStreams


class Sink:
    def __init__(self) -> None:
        self.got: list = []

    def on_response(self, response, final: bool) -> None:
        self.got.append((response, final))


@pytest.fixture
def ends():
    worker_fds, server_fds = socket.socketpair()
    streams = ResponseStreams("test", Arena.create(4096), server_fds)
    # Messages travel as JSON, as over the control socket.
    stream = ResponseStream(lambda m: streams.on_response(decode_to_server(encode(m))), worker_fds)  # type: ignore[arg-type]
    yield stream, streams
    stream.close()
    streams.close()
    worker_fds.close()
    server_fds.close()


def _open(streams: ResponseStreams, sink: Sink) -> int:
    request = InferRequest("m", "1", "req")
    request.responses = sink
    return streams.open([request])[0]


def _response(**arrays) -> pb_utils.InferenceResponse:
    return pb_utils.InferenceResponse([pb_utils.Tensor(k, v) for k, v in arrays.items()])


def test_responses_arrive_in_order_with_their_tensors(ends) -> None:
    stream, streams = ends
    sink = Sink()
    slot = _open(streams, sink)
    sender = ResponseSender(stream, slot, {"A", "S"}, lambda: False)
    for i in range(3):
        sender.send(
            _response(
                A=np.arange(i, i + 4, dtype=np.float32),
                S=np.array([b"x" * i], dtype=np.object_),
                IGNORED=np.zeros(2, np.int8),
            )
        )
    sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
    assert [final for _, final in sink.got] == [False, False, False, True]
    assert sink.got[-1][0] is None
    for i, (response, _) in enumerate(sink.got[:3]):
        names = [o.name for o in response.outputs]
        assert names == ["A", "S"]
        np.testing.assert_array_equal(response.outputs[0].data, np.arange(i, i + 4))
        assert response.outputs[1].data.tolist() == [b"x" * i]
    assert streams.open_count == 0


def test_the_ring_wraps_and_grows(ends) -> None:
    stream, streams = ends
    sink = Sink()
    slot = _open(streams, sink)
    sender = ResponseSender(stream, slot, {"A"}, lambda: False)
    sizes = [300_000] * 10 + [3_000_000] + [100_000] * 5  # wraps the 1 MiB ring, then grows
    for n, size in enumerate(sizes):
        sender.send(_response(A=np.full(size, n % 256, dtype=np.uint8)))
    assert len(sink.got) == len(sizes)
    for n, (response, _) in enumerate(sink.got):
        data = response.outputs[0].data
        assert data.shape == (sizes[n],) and data[0] == data[-1] == n % 256


def test_empty_tensors_need_no_ring(ends) -> None:
    stream, streams = ends
    sink = Sink()
    sender = ResponseSender(stream, _open(streams, sink), {"A", "S"}, lambda: False)
    sender.send(_response(A=np.zeros((0, 3), np.float32), S=np.array([], dtype=np.object_)))
    response, _ = sink.got[0]
    assert response.error is None
    assert [o.data.shape for o in response.outputs] == [(0, 3), (0,)]


def test_a_sender_closed_by_final_raises(ends) -> None:
    stream, streams = ends
    sink = Sink()
    sender = ResponseSender(stream, _open(streams, sink), set(), lambda: False)
    sender.send(pb_utils.InferenceResponse(), flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
    with pytest.raises(pb_utils.TritonModelException, match="Response sender has been closed"):
        sender.send(pb_utils.InferenceResponse())
    with pytest.raises(pb_utils.TritonModelException, match="must be provided"):
        ResponseSender(stream, 1, set(), lambda: False).send(None, 0)


def test_errors_and_cancellation_flags(ends) -> None:
    stream, streams = ends
    sink = Sink()
    request = InferRequest("m", "1", "req")
    request.responses = sink
    slot = streams.open([request])[0]
    flags = streams.flags.buf
    sender = ResponseSender(stream, slot, set(), lambda: flags[slot] != 0)
    assert not sender.is_cancelled()
    streams.cancel(request)
    assert sender.is_cancelled()
    sender.send(pb_utils.InferenceResponse(error=pb_utils.TritonError("nope")))
    response, final = sink.got[0]
    assert not final and response.error is not None and response.error.message == "nope"
    streams.fail_all(Unavailable("gone"))
    response, final = sink.got[-1]
    assert final and response.error.message == "gone"
    assert streams.open_count == 0


def test_slots_are_distinct_reused_and_bounded(ends) -> None:
    stream, streams = ends
    sink = Sink()
    first = [_open(streams, sink) for _ in range(3)]
    assert sorted(first) == [0, 1, 2]
    sender = ResponseSender(stream, first[1], set(), lambda: False)
    sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
    assert _open(streams, sink) == first[1]  # a freed slot comes back first
    for _ in range(MAX_OPEN - 3):
        _open(streams, sink)
    assert streams.open_count == MAX_OPEN
    with pytest.raises(Unavailable, match="too many decoupled requests"):
        _open(streams, sink)
    streams.fail_all(Unavailable("gone"))
    assert streams.open_count == 0 and _open(streams, sink) == 0
