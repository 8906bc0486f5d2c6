"""Streamed calls on the call channel (``exec(decoupled=True)``), over a real socket pair.

The server end answers one call with several records, the last one final; the worker end
queues them in a ``ReplyStream`` that model code takes from, blocking or on its event loop,
reporting what it took so the server can bound what it sends ahead, and cancelling.
"""

from __future__ import annotations

import asyncio
import gc
import socket

import numpy as np

from tritium.backends.python.bls import Answer, CallClient, CallError
from tritium.backends.python.bls_streams import ACK_EVERY, ReplyStream
from tritium.ipc.call_records import MAX_UNREAD
from tritium.ipc.messages import CallReply, InferCall
from tritium.workers.calls import CallChannel, WorkerCall


async def _serve(handler, body):  # noqa: ANN001, ANN202
    server_sock, worker_sock = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    channel = CallChannel(server_sock, "caller:1", handler)
    client = CallClient(worker_sock)
    try:
        return await body(channel, client)
    finally:
        channel.close()
        worker_sock.close()


def _start(client: CallClient) -> ReplyStream:
    stream = ReplyStream(client)
    client.start(InferCall("m", decoupled=True), stream=stream)
    return stream


def _words(call: WorkerCall, count: int) -> None:
    for i in range(count):
        assert call.send_part(CallReply(), [("I", "INT32", np.array([i], np.int32))])
    call.reply(CallReply())  # the final flag alone


def _drain(stream: ReplyStream) -> list:
    items = []
    while True:
        item, final = stream.take(10)
        items.append(item)
        if final:
            return items


def test_one_call_gets_every_answer_in_order_then_the_final_one():
    async def body(channel, client):  # noqa: ANN001, ANN202
        stream = _start(client)
        return await asyncio.get_running_loop().run_in_executor(None, _drain, stream)

    items = asyncio.run(_serve(lambda call: _words(call, 5), body))
    assert [int(a.tensors[0][2][0]) for a in items[:-1]] == [0, 1, 2, 3, 4]
    assert isinstance(items[-1], Answer) and items[-1].tensors == []


def test_async_takes_run_on_the_event_loop():
    async def body(channel, client):  # noqa: ANN001, ANN202
        stream = _start(client)
        items = []
        while True:
            item, final = await asyncio.wait_for(stream.take_async(), 10)
            items.append(item)
            if final:
                return items

    items = asyncio.run(_serve(lambda call: _words(call, 3), body))
    assert len(items) == 4


def test_an_error_answer_can_come_mid_stream():
    def handler(call: WorkerCall) -> None:
        call.send_part(CallReply(error=("INVALID_ARG", "bad word")))
        call.send_part(CallReply(), [("I", "INT32", np.array([1], np.int32))])
        call.reply(CallReply(error=("INTERNAL", "the end")))

    async def body(channel, client):  # noqa: ANN001, ANN202
        return await asyncio.get_running_loop().run_in_executor(None, _drain, _start(client))

    first, second, last = asyncio.run(_serve(handler, body))
    assert isinstance(first, CallError) and first.message == "bad word"
    assert isinstance(second, Answer)
    assert isinstance(last, CallError) and last.code == "INTERNAL"


def test_taken_answers_are_reported_so_a_reader_that_keeps_up_stays_under_the_bound():
    held: list[WorkerCall] = []

    async def body(channel, client):  # noqa: ANN001, ANN202
        stream = _start(client)
        loop = asyncio.get_running_loop()
        while not held:
            await asyncio.sleep(0.01)
        call = held[0]
        call.open_stream(lambda: None)
        for i in range(3 * ACK_EVERY):
            assert call.send_part(CallReply(), [("I", "INT32", np.array([i], np.int32))])
            await loop.run_in_executor(None, stream.take, 10)
        for _ in range(100):  # the last report is on its way
            if call.unread == 0:
                break
            await asyncio.sleep(0.01)
        assert call.unread == 0
        call.reply(CallReply())

    asyncio.run(_serve(held.append, body))


def test_a_reader_that_stops_reading_makes_send_part_say_stop():
    results: list[bool] = []

    def handler(call: WorkerCall) -> None:
        for _ in range(MAX_UNREAD + 1):
            results.append(call.send_part(CallReply()))
        call.reply(CallReply())

    async def body(channel, client):  # noqa: ANN001, ANN202
        _start(client)
        for _ in range(200):
            if results:
                return
            await asyncio.sleep(0.01)

    asyncio.run(_serve(handler, body))
    assert results[:MAX_UNREAD] == [True] * MAX_UNREAD and results[-1] is False


def test_cancel_and_drop_reach_the_server_which_still_ends_the_call():
    cancelled: list[int] = []

    def handler(call: WorkerCall) -> None:
        def on_cancel() -> None:
            cancelled.append(call.message.id)
            call.reply(CallReply(error=("CANCELLED", "BLS request was cancelled")))

        call.open_stream(on_cancel)
        call.send_part(CallReply())

    async def body(channel, client):  # noqa: ANN001, ANN202
        loop = asyncio.get_running_loop()
        stream = _start(client)
        await loop.run_in_executor(None, stream.take, 10)
        stream.cancel()
        item, final = await loop.run_in_executor(None, stream.take, 10)
        assert final and isinstance(item, CallError) and item.code == "CANCELLED"
        dropped = _start(client)
        await loop.run_in_executor(None, dropped.take, 10)
        dropped.drop()
        del dropped
        gc.collect()
        for _ in range(200):
            if len(cancelled) == 2:
                break
            await asyncio.sleep(0.01)
        assert not channel.streams and not channel.open_calls

    asyncio.run(_serve(handler, body))
    assert cancelled == [1, 2]


def test_a_closed_channel_ends_the_stream_with_an_error():
    async def body(channel, client):  # noqa: ANN001, ANN202
        stream = _start(client)
        for _ in range(100):
            if channel.open_calls:
                break
            await asyncio.sleep(0.01)
        channel.close()
        return await asyncio.get_running_loop().run_in_executor(None, stream.take, 10)

    item, final = asyncio.run(_serve(lambda call: None, body))
    assert final and isinstance(item, CallError) and item.code == "UNAVAILABLE"
