"""A real worker process driven directly: the exec message reused for a known layout."""

from __future__ import annotations

import asyncio
from pathlib import Path

import numpy as np
import pytest

from tritium.config import complete_config, config_to_json, load_config_file
from tritium.core import InferRequest, InputTensor, RequestedOutput
from tritium.ipc import FrameDecoder
from tritium.ipc.messages import Exec, Init, decode_to_worker
from tritium.workers import WorkerProcess

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "model_repository"
#: The example's configuration, completed as the model manager completes it.
CONFIG = config_to_json(
    complete_config(load_config_file(EXAMPLES / "add_sub", "add_sub"), "add_sub")  # type: ignore[arg-type]
)


def _request(
    key: object, a: np.ndarray, b: np.ndarray, outputs=("OUTPUT0", "OUTPUT1")
) -> InferRequest:
    request = InferRequest("add_sub", "1", "")
    request.layout_key = key
    request.inputs = [
        InputTensor("INPUT0", "FP32", a.shape, a),
        InputTensor("INPUT1", "FP32", b.shape, b),
    ]
    request.outputs = [RequestedOutput(name, {}) for name in outputs]
    return request


@pytest.fixture
def worker():
    async def start() -> WorkerProcess:
        process = WorkerProcess("add_sub:1")
        await process.spawn()
        await process.load(
            {
                "model_name": "add_sub",
                "model_version": "1",
                "model_dir": str(EXAMPLES / "add_sub"),
                "config": CONFIG,
                "auto_complete": False,
            },
            30,
        )
        await process.initialize(Init(CONFIG, "add_sub_0", "CPU", 0), 30)
        return process

    loop = asyncio.new_event_loop()
    process = loop.run_until_complete(start())
    yield loop, process
    loop.run_until_complete(process.stop(5))
    loop.close()


def test_same_layout_reuses_the_message_with_new_data(worker):
    loop, process = worker
    key = object()

    async def run():
        results = []
        for i in range(5):
            a = np.full(4, i, np.float32)
            b = np.arange(4, dtype=np.float32)
            (response,) = await process.submit([_request(key, a, b)])
            assert response.error is None
            out = {t.name: t.data for t in response.outputs}
            results.append((out["OUTPUT0"], out["OUTPUT1"], a + b, a - b))
        return results

    for got0, got1, want0, want1 in loop.run_until_complete(run()):
        np.testing.assert_array_equal(got0, want0)
        np.testing.assert_array_equal(got1, want1)
    assert len(process._writer.layouts) == 1


def test_same_key_with_other_sizes_is_not_reused(worker):
    loop, process = worker
    key = object()

    async def run():
        first = _request(key, np.ones(4, np.float32), np.ones(4, np.float32))
        await process.submit([first])
        # A wrongly shared key with bigger tensors must not reuse the cached offsets
        # (the model then rejects the shape itself, or computes on all 8 values).
        a = np.arange(8, dtype=np.float32)
        (response,) = await process.submit([_request(key, a, a, outputs=("OUTPUT0",))])
        return response

    response = loop.run_until_complete(run())
    assert response.error is None
    np.testing.assert_array_equal(response.outputs[0].data, np.arange(8, dtype=np.float32) * 2)


def test_completion_callbacks_run_before_the_loop_turns(worker):
    loop, process = worker
    order = []

    async def run():
        done = process.submit([_request(None, np.ones(4, np.float32), np.ones(4, np.float32))])
        done.add_done_callback(lambda _: order.append("callback"))
        await done
        order.append("awaited")

    loop.run_until_complete(run())
    assert order == ["callback", "awaited"]


def test_a_batch_of_mixed_layouts_repeats_only_identical_items(worker):
    loop, process = worker
    key, other = object(), object()
    four = np.arange(4, dtype=np.float32)
    eight = np.arange(8, dtype=np.float32)
    batch = [
        _request(key, four, four),
        _request(key, four + 1, four),  # same item as the one before: sent as 0
        _request(key, eight, eight),  # same key, other sizes: a full item again
        _request(None, four, four + 2),  # no key: never repeated
        _request(None, four, four + 2),
        _request(other, four, four, outputs=("OUTPUT1",)),
    ]
    frames: list[bytes] = []
    replies: list = []
    transport = process._transport
    write, read = transport.write, process._flight._read_responses

    def spy_write(frame):
        frames.append(bytes(frame))
        write(frame)

    def spy_read(requests, reply, block, out):
        replies.append(reply)
        return read(requests, reply, block, out)

    transport.write = spy_write
    process._flight._read_responses = spy_read
    try:
        responses = loop.run_until_complete(process.submit(batch))
    finally:
        transport.write = write
        del process._flight._read_responses
    (message,) = FrameDecoder(decode_to_worker).feed(frames[-1])
    assert isinstance(message, Exec)
    assert [type(item) is int for item in message.requests] == [
        False,
        True,
        False,
        False,
        False,
        False,
    ]
    for request, response in zip(batch, responses):
        assert response.error is None
        a, b = (t.data for t in request.inputs)
        got = {t.name: t.data for t in response.outputs}
        assert set(got) == {o.name for o in request.outputs}
        if "OUTPUT0" in got:
            np.testing.assert_array_equal(got["OUTPUT0"], a + b)
        np.testing.assert_array_equal(got["OUTPUT1"], a - b)
    # Replies whose descriptors repeat the one before travel as 0 too (first two, and the
    # fourth and fifth: same names, types, shapes and sizes).
    items = replies[-1].responses
    assert [type(item) is int for item in items] == [False, True, False, False, True, False]


def test_outputs_outlive_the_next_batch(worker):
    loop, process = worker

    async def run():
        first = await process.submit(
            [_request(None, np.ones(4, np.float32), np.ones(4, np.float32))]
        )
        await process.submit([_request(None, np.zeros(4, np.float32), np.zeros(4, np.float32))])
        return first

    (response,) = loop.run_until_complete(run())
    np.testing.assert_array_equal(response.outputs[0].data, np.full(4, 2, np.float32))
    response.outputs[0].data[0] = 7  # owned by the response: writable, the arena untouched


def test_big_inputs_are_written_a_slice_per_loop_turn(worker):
    # 3 MiB per input: written 2 MiB per loop iteration, the exec message sent after the
    # last slice; the second request reuses the layout and its write path.
    loop, process = worker
    key = object()
    n = 3 << 18

    async def run():
        results = []
        for i in range(2):
            a = np.arange(n, dtype=np.float32) + i
            b = np.full(n, 2, np.float32)
            done = process.submit([_request(key, a, b)])
            left = sum(len(src) for _, src in process._writer.sliced.items)
            (response,) = await done
            out = {t.name: t.data for t in response.outputs}
            results.append((left, out["OUTPUT0"], a + b, out["OUTPUT1"], a - b))
        return results

    for left, got0, want0, got1, want1 in loop.run_until_complete(run()):
        assert left == 2 * n * 4  # both inputs go through the slices, not written at once
        np.testing.assert_array_equal(got0, want0)
        np.testing.assert_array_equal(got1, want1)


def test_a_stop_while_big_inputs_are_written_fails_the_batch(worker):
    loop, process = worker
    n = 3 << 18
    a = np.ones(n, np.float32)

    async def run():
        done = process.submit([_request(None, a, a)])
        await asyncio.sleep(0)
        await process.stop(5)
        for _ in range(5):  # the remaining slices find the batch ended
            await asyncio.sleep(0)
        return done

    done = loop.run_until_complete(run())
    assert done.done() and done.exception() is not None
    assert not process._writer.sliced.items  # nothing held once no batch is in flight


def test_big_answers_are_copied_out_a_slice_per_loop_turn(worker, monkeypatch):
    # 2 x 3 MiB of outputs: copied out of the output arena 2 MiB per loop iteration, with
    # other callbacks running in between; the instance stays busy until the copy is done.
    loop, process = worker
    n = 3 << 18
    a = np.arange(n, dtype=np.float32)
    b = np.full(n, 2, np.float32)
    slices = []
    read = process._flight._read_slices

    def spy(message, block, done, out):
        slices.append((done, process.busy))
        read(message, block, done, out)

    monkeypatch.setattr(process._flight, "_read_slices", spy)

    async def run():
        turns = 0
        done = process.submit([_request(None, a, b)])
        while not done.done():
            await asyncio.sleep(0)
            turns += 1
        (response,) = done.result()
        return turns, response

    turns, response = loop.run_until_complete(run())
    out = {t.name: t.data for t in response.outputs}
    np.testing.assert_array_equal(out["OUTPUT0"], a + b)
    np.testing.assert_array_equal(out["OUTPUT1"], a - b)
    assert len(slices) >= 3 and all(busy for _, busy in slices)  # ceil(6 MiB / 2 MiB)
    assert turns >= len(slices)
    assert not process.busy
    out["OUTPUT0"][0] = 7  # owned by the response: writable


def test_a_worker_killed_while_a_big_answer_is_copied_fails_the_batch(worker, monkeypatch):
    loop, process = worker
    n = 3 << 18
    a = np.ones(n, np.float32)
    read = process._flight._read_slices
    killed = []

    def kill_first(message, block, done, out):
        if not killed:
            killed.append(True)
            process.kill()
        read(message, block, done, out)

    monkeypatch.setattr(process._flight, "_read_slices", kill_first)

    async def run():
        done = process.submit([_request(None, a, a)])
        for _ in range(2000):
            if done.done():
                break
            await asyncio.sleep(0.005)
        return done

    done = loop.run_until_complete(run())
    assert killed and done.done() and done.exception() is not None
