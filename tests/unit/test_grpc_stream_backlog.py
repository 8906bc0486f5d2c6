"""ModelStreamInfer over async iterators (the grpcio transport) reads no further request
while too many are in flight or answered and not yet taken."""

from __future__ import annotations

import asyncio

import numpy as np
from tritonclient.grpc import service_pb2

from tritium.core import Completion, InferResponse
from tritium.frontends.grpc import infer_calls


class _HeldService:
    """Accepts every request and answers only when told to."""

    def __init__(self) -> None:
        self.pending: list[tuple[object, Completion]] = []

    def submit(self, request, stream=None):
        done: Completion = Completion()
        self.pending.append((request, done))
        return done

    def answer_all(self) -> None:
        held, self.pending = self.pending, []
        for request, done in held:
            done.set_result(InferResponse(request.model_name, "1", request.id))


def _message(i: int) -> service_pb2.ModelInferRequest:
    message = service_pb2.ModelInferRequest(model_name="m", id=str(i))
    message.inputs.add(name="IN", datatype="FP32", shape=[1])
    message.raw_input_contents.append(np.float32(i).tobytes())
    return message


def test_requests_are_not_read_past_the_backlog(monkeypatch):
    monkeypatch.setattr(infer_calls, "MAX_STREAM_BACKLOG", 3)

    async def main() -> None:
        service = _HeldService()
        read = []

        async def requests():
            for i in range(10):
                read.append(i)
                yield _message(i)

        replies = infer_calls.model_stream_infer(service, requests())  # type: ignore[arg-type]
        first = asyncio.ensure_future(replies.__anext__())
        for _ in range(20):
            await asyncio.sleep(0)
        # Three submitted and unanswered: the fourth request was read, then the reader waits.
        assert len(service.pending) == 3 and len(read) == 4
        service.answer_all()
        got = [await first]
        for _ in range(20):
            await asyncio.sleep(0)
        # The answers of 1 and 2 are queued, not taken: room for one more in flight.
        assert len(service.pending) == 1
        while len(got) < 10:
            service.answer_all()
            got.append(await asyncio.wait_for(replies.__anext__(), 5))
        ids = sorted(int(r.infer_response.id) for r in got)
        assert ids == list(range(10)) and not any(r.error_message for r in got)
        await replies.aclose()

    asyncio.run(main())
