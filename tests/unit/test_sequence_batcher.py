"""SequenceBatcher (the asyncio shell) with fake runners, a fake clock and a fake timer."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

from tritium.core import InferRequest, InferResponse, InputTensor, OutputTensor
from tritium.core.errors import InvalidArgument, Unavailable
from tritium.scheduling.sequence import SequenceBatcher
from tritium.scheduling.sequence_config import SequenceConfig
from tritium.scheduling.sequence_policy import FLAG_END, FLAG_START
from tritium.testing import FakeClock, FakeRunner


class FakeTimer:
    def __init__(self) -> None:
        self.armed: list[list] = []

    def __call__(self, when_ns, callback):
        slot = [when_ns, callback, False]
        self.armed.append(slot)

        class Handle:
            def cancel(self) -> None:
                slot[2] = True

        return Handle()

    def fire(self) -> None:
        pending = [s for s in self.armed if not s[2]]
        self.armed = []
        for slot in pending:
            slot[1]()


def model_config(**batching) -> dict:
    sequence = {
        "control_input": [
            {"name": "START", "control": [{"kind": "CONTROL_SEQUENCE_START", "int32_false_true": [0, 1]}]},
            {"name": "CORRID", "control": [{"kind": "CONTROL_SEQUENCE_CORRID", "data_type": "TYPE_UINT64"}]},
        ],
        "oldest": {"max_candidate_sequences": 4, "preferred_batch_size": [4]},
        "max_sequence_idle_microseconds": 1_000_000,
    }
    sequence.update(batching)
    return {
        "name": "m",
        "max_batch_size": 4,
        "output": [{"name": "OUT"}],
        "sequence_batching": sequence,
    }


def make(runners, config=None, **kwargs):
    clock, timer = FakeClock(), FakeTimer()
    cfg = SequenceConfig.from_config(config or model_config())
    batcher = SequenceBatcher(runners, cfg, clock=clock, timer=timer, **kwargs)
    return batcher, clock, timer


def req(key, flags=0, rid="") -> InferRequest:
    return InferRequest("m", id=rid or f"{key}:{flags}", correlation_id=key, flags=flags)


def inputs_of(request: InferRequest) -> dict:
    return {t.name: t.data.reshape(-1).tolist() for t in request.inputs}


def reply(batch, outputs=None) -> list[InferResponse]:
    responses = []
    for request in batch:
        response = InferResponse("m", "1", request.id)
        response.outputs = list(outputs(request) if outputs else [])
        responses.append(response)
    return responses


async def settle() -> None:
    for _ in range(3):
        await asyncio.sleep(0)


def test_controls_reach_the_runner_and_the_next_batch_goes_before_responses():
    async def main():
        runner = FakeRunner("r0")
        batcher, _, _ = make([runner])
        first = batcher.submit(req(7, FLAG_START, "a"))
        second = batcher.submit(req(7, 0, "b"))
        assert runner.batches == [["a"]]
        request = runner.inflight[0][0][0]
        assert inputs_of(request) == {"START": [1], "CORRID": [7]}
        assert request.layout_key is None
        seen = []
        first.add_done_callback(lambda _: seen.append(list(runner.batches)))
        runner.finish()
        await settle()
        assert seen == [[["a"], ["b"]]]  # "b" was dispatched before "a" was answered
        assert inputs_of(runner.inflight[0][0][0]) == {"START": [0], "CORRID": [7]}
        runner.finish()
        await settle()
        assert second.done() and (await second).id == "b"

    asyncio.run(main())


def test_implicit_state_goes_from_a_response_to_the_next_request():
    config = model_config(
        state=[
            {
                "input_name": "S_IN",
                "output_name": "S_OUT",
                "data_type": "TYPE_INT32",
                "dims": [1],
                "initial_state": [{"data_type": "TYPE_INT32", "dims": [1], "zero_data": True}],
            }
        ]
    )

    def outputs(request):
        state = next(t.data for t in request.inputs if t.name == "S_IN")
        yield OutputTensor("OUT", "INT32", (1, 1), state + 100)
        yield OutputTensor("S_OUT", "INT32", (1, 1), state + 1)

    async def main():
        runner = FakeRunner("r0")
        batcher, _, _ = make([runner], config)
        answers = [batcher.submit(req(3, FLAG_START if i == 0 else 0, f"s{i}")) for i in range(3)]
        for _ in range(3):
            batch = runner.inflight[0][0]
            runner.finish(reply(batch, outputs))
            await settle()
        got = [await a for a in answers]
        assert [r.outputs[0].data.tolist() for r in got] == [[[100]], [[101]], [[102]]]
        assert all([o.name for o in r.outputs] == ["OUT"] for r in got)  # S_OUT hidden
        restart = batcher.submit(req(3, FLAG_START, "again"))
        assert inputs_of(runner.inflight[0][0][0])["S_IN"] == [0]
        runner.finish(reply(runner.inflight[0][0], outputs))
        await settle()
        assert (await restart).outputs[0].data.tolist() == [[100]]

    asyncio.run(main())


def test_refusals_raise_at_submit():
    async def main():
        batcher, _, _ = make([FakeRunner("r0")])
        with pytest.raises(InvalidArgument, match="correlation ID"):
            batcher.submit(req(0, FLAG_START))
        with pytest.raises(InvalidArgument, match="START flag"):
            batcher.submit(req(9))

    asyncio.run(main())


def test_a_dead_instance_fails_its_batch_and_the_sequence_goes_on_after_restart():
    async def main():
        runner = FakeRunner("r0")
        batcher, _, _ = make([runner])
        first = batcher.submit(req(1, FLAG_START, "a"))
        runner.die()
        await settle()
        with pytest.raises(Unavailable, match="exited unexpectedly"):
            await first
        follow = batcher.submit(req(1, 0, "b"))
        assert runner.batches == [["a"]]  # waits for the instance
        runner.revive()
        assert runner.batches == [["a"], ["b"]]
        runner.finish()
        assert (await follow).id == "b"

    asyncio.run(main())


def test_queue_delay_waits_on_the_timer():
    async def main():
        runner = FakeRunner("r0")
        config = model_config(
            oldest={"max_candidate_sequences": 4, "preferred_batch_size": [2], "max_queue_delay_microseconds": 100}
        )
        batcher, clock, timer = make([runner], config)
        batcher.submit(req(1, FLAG_START, "a"))
        assert runner.batches == [] and [s[0] for s in timer.armed] == [100_000]
        clock.now = 100_000
        timer.fire()
        assert runner.batches == [["a"]]

    asyncio.run(main())


def test_preserve_ordering_holds_later_batches_back():
    async def main():
        runners = [FakeRunner("r0"), FakeRunner("r1")]
        config = model_config(oldest={"max_candidate_sequences": 1, "preserve_ordering": True})
        batcher, _, _ = make(runners, config)
        first = batcher.submit(req(1, FLAG_START, "a"))
        second = batcher.submit(req(2, FLAG_START, "b"))
        assert runners[0].batches == [["a"]] and runners[1].batches == [["b"]]
        runners[1].finish()
        await settle()
        assert not second.done()
        runners[0].finish()
        await settle()
        assert first.done() and second.done()

    asyncio.run(main())


def test_cancel_drops_a_queued_request_and_fail_all_empties_the_batcher():
    async def main():
        runner = FakeRunner("r0")
        batcher, _, _ = make([runner])
        batcher.submit(req(1, FLAG_START, "a"))
        dropped = batcher.submit(req(1, 0, "b"))
        kept = batcher.submit(req(1, FLAG_END, "c"))
        dropped.cancel()
        runner.finish()
        await settle()
        assert runner.batches == [["a"], ["c"]]
        waiting = batcher.submit(req(2, FLAG_START, "d"))
        runner.finish()
        await settle()
        assert (await kept).id == "c"
        runner.finish()
        await settle()
        assert waiting.done()
        queued = [batcher.submit(req(3, FLAG_START, "e")), batcher.submit(req(3, 0, "f"))]
        batcher.fail_all(Unavailable("model 'm' is unloading"))
        with pytest.raises(Unavailable, match="unloading"):
            await queued[1]
        assert batcher.statistics().active_sequences == 0
        batcher.close()

    asyncio.run(main())


def test_idle_sequences_are_released_by_the_reaper():
    async def main():
        runner = FakeRunner("r0")
        config = model_config(max_sequence_idle_microseconds=20_000)  # 20 ms
        loop_clock = lambda: int(asyncio.get_running_loop().time() * 1e9)  # noqa: E731
        batcher = SequenceBatcher(
            [runner], SequenceConfig.from_config(config), clock=loop_clock, timer=FakeTimer()
        )
        answer = batcher.submit(req(5, FLAG_START, "a"))
        runner.finish()
        await answer
        await asyncio.sleep(0.1)
        assert batcher.statistics().idle_released == 1
        with pytest.raises(InvalidArgument, match="START flag"):
            batcher.submit(req(5))
        batcher.close()

    asyncio.run(main())



def test_direct_strategy_fills_empty_slots_before_the_last_with_null_requests():
    """As Triton: a batch is slot-positioned; an empty slot before the last one used gets a
    null request (zeros, every control false, READY false) whose answer is dropped."""
    config = model_config(direct={}, oldest=None)
    del config["sequence_batching"]["oldest"]
    config["sequence_batching"]["control_input"].append(
        {"name": "READY", "control": [{"kind": "CONTROL_SEQUENCE_READY", "int32_false_true": [0, 1]}]}
    )

    async def main():
        runner = FakeRunner("r0")
        batcher, _, _ = make([runner], config)
        first = batcher.submit(req(1, FLAG_START, "one"))  # slot 0, runs at once
        second = InferRequest("m", id="two", correlation_id=2, flags=FLAG_START)  # slot 1
        second.inputs = [InputTensor("X", "FP32", (1, 1), np.array([[4.0]], np.float32))]
        answer = batcher.submit(second)
        runner.finish()
        await settle()
        assert (await first).id == "one"
        sent = runner.inflight[0][0]
        assert [r.id for r in sent] == ["", "two"]
        assert [r.batch_size for r in sent] == [0, 1]  # inference_count leaves nulls out
        assert inputs_of(sent[0]) == {"X": [0.0], "START": [0], "CORRID": [0], "READY": [0]}
        assert inputs_of(sent[1]) == {"X": [4.0], "START": [1], "CORRID": [2], "READY": [1]}
        runner.finish()
        await settle()
        assert (await answer).id == "two"
        tail = batcher.submit(req(1, 0, "again"))  # slot 0: nothing to fill
        assert [r.id for r in runner.inflight[0][0]] == ["again"]
        runner.finish()
        await tail

    asyncio.run(main())
