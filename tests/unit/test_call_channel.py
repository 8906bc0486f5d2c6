"""The call channel between model code and the server, over a real socket pair (no worker).

The server end (``CallChannel``) runs on an event loop; the worker end (``CallClient``) is
called from threads, as model code calls it.
"""

from __future__ import annotations

import asyncio
import socket

import numpy as np
import pytest

from tritium.backends.python.bls import CallClient, CallError
from tritium.ipc.call_records import (
    INLINE_LIMIT,
    decode_record,
    encode_record,
    pack_tensors,
    unpack_tensors,
)
from tritium.ipc.messages import (
    CallReply,
    InferCall,
    ModelReadyCall,
    decode_call,
    decode_call_reply,
)
from tritium.workers.calls import CallChannel, WorkerCall


def test_records_round_trip_inline_tensors_including_bytes():
    tensors = [
        ("A", "FP32", np.arange(6, dtype=np.float32).reshape(2, 3)),
        ("S", "BYTES", np.array([b"x", b"yz"], dtype=object)),
        ("E", "INT64", np.zeros((0, 2), np.int64)),
    ]
    packed = pack_tensors(tensors)
    assert packed.arena is None
    call = InferCall("m", inputs=packed.descriptors)  # type: ignore[arg-type]
    message, inline = decode_record(encode_record(call, packed.inline), decode_call)
    assert isinstance(message, InferCall)
    out = unpack_tensors(message.inputs, inline)
    assert [(n, d) for n, d, _ in out] == [("A", "FP32"), ("S", "BYTES"), ("E", "INT64")]
    np.testing.assert_array_equal(out[0][2], tensors[0][2])
    assert list(out[1][2]) == [b"x", b"yz"]
    assert out[2][2].shape == (0, 2)


def test_large_tensors_go_through_an_arena():
    big = np.ones(INLINE_LIMIT, np.float32)
    packed = pack_tensors([("B", "FP32", big)])
    assert packed.arena is not None and packed.inline == b""
    out = unpack_tensors(packed.descriptors, packed.arena.buf)
    np.testing.assert_array_equal(out[0][2], big)
    del out
    packed.arena.close()


def test_descriptors_past_the_data_are_refused():
    packed = pack_tensors([("A", "FP32", np.ones(4, np.float32))])
    with pytest.raises(ValueError):
        unpack_tensors(packed.descriptors, bytes(8))


async def _serve(handler, body):  # noqa: ANN001, ANN202
    server_sock, worker_sock = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    channel = CallChannel(server_sock, "caller:1", handler)
    client = CallClient(worker_sock)
    try:
        return await body(channel, client)
    finally:
        channel.close()
        worker_sock.close()


def _doubler(call: WorkerCall) -> None:
    if isinstance(call.message, ModelReadyCall) and call.message.model == "fail":
        call.reply(CallReply(error=("NOT_FOUND", "no such thing")))
        return
    outputs = [(name, datatype, array * 2) for name, datatype, array in call.tensors]
    call.reply(CallReply(params={"caller": call.label}), outputs)


@pytest.mark.parametrize("size", [4, INLINE_LIMIT])  # inline and through an arena
def test_calls_are_answered_with_tensors(size):
    x = np.arange(size, dtype=np.float32)

    async def body(channel, client):  # noqa: ANN001, ANN202
        loop = asyncio.get_running_loop()
        answers = await asyncio.gather(
            *(
                loop.run_in_executor(None, client.call, InferCall("m"), [("X", "FP32", x + i)], 10)
                for i in range(3)
            )
        )
        return answers

    answers = asyncio.run(_serve(_doubler, body))
    for i, answer in enumerate(answers):
        ((name, datatype, y),) = answer.tensors
        assert (name, datatype) == ("X", "FP32")
        np.testing.assert_array_equal(y, 2 * (x + i))
        y[0] = -1  # the worker's copy is its own to change
        assert answer.message.params == {"caller": "caller:1"}


def test_error_answers_raise_call_errors():
    async def body(channel, client):  # noqa: ANN001, ANN202
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(None, client.call, ModelReadyCall("fail"), [], 10)

    with pytest.raises(CallError) as info:
        asyncio.run(_serve(_doubler, body))
    assert (info.value.code, info.value.message) == ("NOT_FOUND", "no such thing")


def test_a_closed_server_end_fails_waiting_calls_and_abandons_open_ones():
    abandoned = []

    def hold(call: WorkerCall) -> None:
        call.on_abandon = lambda: abandoned.append(call.message.id)

    async def body(channel, client):  # noqa: ANN001, ANN202
        future = client.start_async(InferCall("m"), [("X", "FP32", np.ones(2, np.float32))])
        for _ in range(100):
            if channel.open_calls:
                break
            await asyncio.sleep(0.01)
        channel.close()
        with pytest.raises(CallError, match="closed the call channel"):
            await asyncio.wait_for(future, 10)

    asyncio.run(_serve(hold, body))
    assert abandoned == [1]


def test_sync_and_async_calls_mixed():
    x = np.ones(3, np.float32)

    async def body(channel, client):  # noqa: ANN001, ANN202
        loop = asyncio.get_running_loop()
        waiting = client.start_async(InferCall("m"), [("X", "FP32", x)])  # reader thread
        sync = loop.run_in_executor(None, client.call, InferCall("m"), [("X", "FP32", 3 * x)], 10)
        return await asyncio.wait_for(asyncio.gather(waiting, sync), 10)

    first, second = asyncio.run(_serve(_doubler, body))
    np.testing.assert_array_equal(first.tensors[0][2], 2 * x)
    np.testing.assert_array_equal(second.tensors[0][2], 6 * x)


def test_records_too_big_to_arrive_whole_are_refused_on_both_ends():
    many = [(f"T{i}", "FP32", np.zeros(0, np.float32)) for i in range(10000)]

    def reply_many(call: WorkerCall) -> None:
        call.reply(CallReply(), many)

    async def body(channel, client):  # noqa: ANN001, ANN202
        loop = asyncio.get_running_loop()
        with pytest.raises(CallError, match="request's description exceeds"):
            await loop.run_in_executor(None, client.call, ModelReadyCall("x"), many, 10)
        with pytest.raises(CallError, match="response's description exceeds"):
            await loop.run_in_executor(None, client.call, ModelReadyCall("x"), [], 10)

    asyncio.run(_serve(reply_many, body))


def test_calls_in_flight_per_worker_are_bounded(monkeypatch):
    import tritium.workers.calls as calls

    monkeypatch.setattr(calls, "MAX_OPEN_CALLS", 2)

    def hold(call: WorkerCall) -> None:  # never answered
        pass

    async def body(channel, client):  # noqa: ANN001, ANN202
        held = [client.start_async(ModelReadyCall("x")) for _ in range(2)]
        with pytest.raises(CallError, match="more than 2 requests"):
            await asyncio.wait_for(client.start_async(ModelReadyCall("x")), 10)
        assert len(channel.open_calls) == 2 and not any(f.done() for f in held)
        for future in held:
            future.cancel()

    asyncio.run(_serve(hold, body))


def test_a_call_of_an_unknown_kind_is_answered_with_an_error_naming_it():
    async def body():  # noqa: ANN202
        server_sock, worker_sock = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        channel = CallChannel(server_sock, "caller:1", _doubler)
        try:
            worker_sock.setblocking(False)
            worker_sock.send(encode_record({"op": "bogus", "id": 7}))
            receiving = asyncio.get_running_loop().sock_recv(worker_sock, 1 << 16)
            data = await asyncio.wait_for(receiving, 10)
        finally:
            channel.close()
            worker_sock.close()
        return decode_record(data, decode_call_reply)[0]

    reply = asyncio.run(body())
    assert reply.id == 7 and reply.error is not None
    assert reply.error[0] == "INVALID_ARG" and "unknown message kind 'bogus'" in reply.error[1]
