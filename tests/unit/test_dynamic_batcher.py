"""DynamicBatcher with fake runners, a fake clock and a fake timer: never sleeps."""

from __future__ import annotations

import asyncio
import gc
import time

import pytest
import uvloop

from tritium.core import InferRequest, InferResponse
from tritium.core.errors import InternalError, Unavailable
from tritium.scheduling.batch_config import BatchingConfig, QueuePolicy
from tritium.scheduling.batch_policy import BatchPolicy
from tritium.scheduling.deadline_timer import DeadlineTimer
from tritium.scheduling.dynamic import DynamicBatcher
from tritium.testing import FakeClock, FakeRunner

US = 1000


class FakeTimer:
    """Records the one timer the batcher may hold; the test fires it."""

    def __init__(self) -> None:
        self.armed: list[list] = []  # [when_ns, callback, cancelled]

    def __call__(self, when_ns, callback):
        slot = [when_ns, callback, False]
        self.armed.append(slot)
        test_timer = self

        class Handle:
            def cancel(self) -> None:
                slot[2] = True
                assert slot in test_timer.armed

        return Handle()

    def pending(self) -> list[int]:
        return [when for when, _, cancelled in self.armed if not cancelled]

    def fire(self) -> None:
        live = [slot for slot in self.armed if not slot[2]]
        assert len(live) == 1, f"expected exactly one armed timer, got {live}"
        live[0][2] = True
        live[0][1]()


async def _settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


def _req(i: int, rows: int = 1) -> InferRequest:
    return InferRequest("m", id=str(i), batch_size=rows)


def _batcher(runners, clock=None, timer=None, **config) -> DynamicBatcher:
    config.setdefault("max_batch_size", 8)
    policy = BatchPolicy(BatchingConfig(**config))
    return DynamicBatcher(runners, policy, clock=clock or FakeClock(), timer=timer or FakeTimer())


def _start(sched: DynamicBatcher, *requests: InferRequest) -> list[asyncio.Future]:
    return [asyncio.ensure_future(sched.submit(r)) for r in requests]


def test_batches_accumulate_while_the_runner_is_busy():
    async def main():
        runner = FakeRunner("a")
        sched = _batcher([runner])
        tasks = _start(sched, *(_req(i) for i in range(4)))
        await _settle()
        assert runner.batches == [["0"]]  # no delay: the first goes alone at once
        assert sched.statistics().queued == 3
        runner.finish()
        await _settle()
        assert runner.batches == [["0"], ["1", "2", "3"]]
        runner.finish()
        results = await asyncio.gather(*tasks)
        assert [r.id for r in results] == ["0", "1", "2", "3"]  # each gets its own

    asyncio.run(main())


def test_queue_delay_uses_one_timer_and_sends_at_the_deadline():
    async def main():
        runner, clock, timer = FakeRunner("a"), FakeClock(), FakeTimer()
        sched = _batcher([runner], clock, timer, preferred_batch_sizes=(4,), max_queue_delay_us=100)
        first = _start(sched, _req(0))
        await _settle()
        clock.now = 30 * US
        second = _start(sched, _req(1))
        await _settle()
        assert runner.batches == []
        assert timer.pending() == [100 * US]  # from the oldest request, armed once
        assert len(timer.armed) == 1
        clock.now = 100 * US
        timer.fire()
        assert runner.batches == [["0", "1"]]
        runner.finish()
        await asyncio.gather(*first, *second)
        stats = sched.statistics()
        assert stats.queue_count == 2 and stats.queue_ns == 100 * US + 70 * US

    asyncio.run(main())


def test_preferred_size_goes_without_waiting_for_the_timer():
    async def main():
        runner, timer = FakeRunner("a"), FakeTimer()
        sched = _batcher([runner], timer=timer, preferred_batch_sizes=(2,), max_queue_delay_us=100)
        tasks = _start(sched, _req(0), _req(1))
        await _settle()
        assert runner.batches == [["0", "1"]]
        runner.finish()
        await asyncio.gather(*tasks)
        timer.fire()  # the stale timer finds nothing to do
        assert runner.batches == [["0", "1"]]

    asyncio.run(main())


def test_earlier_deadline_replaces_the_armed_timer():
    async def main():
        runner, clock, timer = FakeRunner("a"), FakeClock(), FakeTimer()
        sched = _batcher(
            [runner],
            clock,
            timer,
            max_queue_delay_us=100,
            default_queue_policy=QueuePolicy(default_timeout_us=500, allow_timeout_override=True),
        )
        _start(sched, _req(0))
        await _settle()
        assert timer.pending() == [100 * US]
        clock.now = 10 * US
        request = _req(1)
        request.timeout_us = 20  # expires at 30us, before the batch's delay
        task = _start(sched, request)[0]
        await _settle()
        assert timer.pending() == [30 * US]
        clock.now = 30 * US
        timer.fire()
        with pytest.raises(Unavailable, match="^Request timeout expired$"):
            await task
        assert timer.pending() == [100 * US]
        sched.fail_all(Unavailable("unloading"))

    asyncio.run(main())


def test_batches_go_to_free_runners_never_to_a_busy_one():
    async def main():
        a, b = FakeRunner("a"), FakeRunner("b")
        sched = _batcher([a, b], max_batch_size=2)
        tasks = _start(sched, *(_req(i) for i in range(5)))
        await _settle()
        assert sorted(a.batches + b.batches) == [["0"], ["1"]]
        a.finish()
        await _settle()
        assert len(a.batches) == 2 and a.batches[1] == ["2", "3"]
        b.finish()
        await _settle()
        assert b.batches[1] == ["4"]
        a.finish()
        b.finish()
        assert [r.id for r in await asyncio.gather(*tasks)] == ["0", "1", "2", "3", "4"]
        stats = sched.statistics()
        assert (stats.executions, stats.inferences) == (4, 5)
        assert stats.batch_stats == {1: 3, 2: 1}

    asyncio.run(main())


def test_rows_feed_inference_count_and_batch_stats():
    async def main():
        runner = FakeRunner("a")
        sched = _batcher([runner], max_batch_size=8)
        tasks = _start(sched, _req(0, rows=3), _req(1, rows=2), _req(2, rows=4))
        await _settle()
        runner.finish()  # ran "0" alone
        await _settle()
        assert runner.batches[1] == ["1", "2"]
        runner.finish()
        await asyncio.gather(*tasks)
        stats = sched.statistics()
        assert (stats.executions, stats.inferences, stats.batch_stats) == (2, 9, {3: 1, 6: 1})

    asyncio.run(main())


def _ordering_run(preserve: bool):
    async def main():
        a, b = FakeRunner("a"), FakeRunner("b")
        sched = _batcher([a, b], max_batch_size=1, preserve_ordering=preserve)
        first, second = _start(sched, _req(0), _req(1))
        await _settle()
        later = b if b.batches == [["1"]] else a
        earlier = a if later is b else b
        later.finish()  # the second request's batch completes first
        await _settle()
        seen = (first.done(), second.done())
        earlier.finish()
        await _settle()
        assert first.done() and second.done()
        return seen

    return asyncio.run(main())


def test_preserve_ordering_holds_a_later_response_until_earlier_ones_are_out():
    assert _ordering_run(preserve=True) == (False, False)


def test_without_preserve_ordering_responses_go_as_batches_complete():
    assert _ordering_run(preserve=False) == (False, True)


def test_preserve_ordering_keeps_failures_in_order_too():
    async def main():
        a, b = FakeRunner("a"), FakeRunner("b")
        sched = _batcher([a, b], max_batch_size=1, preserve_ordering=True)
        first, second = _start(sched, _req(0), _req(1))
        await _settle()
        holder_of_second = a if a.batches == [["1"]] else b
        other = b if holder_of_second is a else a
        holder_of_second.die()
        await _settle()
        assert not second.done()
        other.finish()
        await _settle()
        assert (await first).id == "0"
        with pytest.raises(Unavailable, match="exited unexpectedly"):
            await second

    asyncio.run(main())


def test_cancelled_callers_are_dropped_when_queued_and_forwarded_when_running():
    async def main():
        runner = FakeRunner("a")
        sched = _batcher([runner])
        running, queued, kept = _start(sched, _req(0), _req(1), _req(2))
        await _settle()
        running.cancel()
        queued.cancel()
        await _settle()
        assert [r.id for r in runner.cancelled] == ["0"]
        assert sched.statistics().queued == 1
        runner.finish()  # the cancelled batch still completes on the instance
        await _settle()
        assert runner.batches[1] == ["2"]
        runner.finish()
        assert (await kept).id == "2"

    asyncio.run(main())


def test_dead_runner_fails_its_batch_and_is_reused_after_restart():
    async def main():
        runner = FakeRunner("a")
        sched = _batcher([runner])
        first, queued = _start(sched, _req(0), _req(1))
        await _settle()
        runner.die()
        await _settle()
        with pytest.raises(Unavailable, match="exited unexpectedly"):
            await first
        assert not runner.inflight and not queued.done()  # waits for the restart
        runner.revive()
        await _settle()
        runner.finish()
        assert (await queued).id == "1"

    asyncio.run(main())


def test_idle_runner_that_is_down_is_parked_and_others_take_the_work():
    async def main():
        a, b = FakeRunner("a"), FakeRunner("b")
        b.running = False  # crashed while idle
        sched = _batcher([a, b])
        task = _start(sched, _req(0))[0]
        await _settle()
        assert a.batches == [["0"]] and b.batches == [] and len(b.ready_callbacks) == 1
        a.finish()
        await task
        assert sched.statistics().idle_runners == 1

    asyncio.run(main())


def test_failed_restart_fails_queued_requests_when_no_runner_is_left():
    async def main():
        runner = FakeRunner("a")
        sched = _batcher([runner])
        first, queued = _start(sched, _req(0), _req(1))
        await _settle()
        runner.die()
        await _settle()
        for cb in runner.failure_callbacks:
            cb()
        with pytest.raises(Unavailable, match="no instance of the model is running"):
            await queued
        with pytest.raises(Unavailable):
            await first

    asyncio.run(main())


def test_timed_out_requests_are_rejected_when_the_runner_frees():
    async def main():
        runner, clock = FakeRunner("a"), FakeClock()
        sched = _batcher([runner], clock, default_queue_policy=QueuePolicy(default_timeout_us=50))
        first, late, fresh = _start(sched, _req(0), _req(1), _req(2))
        await _settle()
        clock.now = 40 * US
        newer = _start(sched, _req(3))[0]
        await _settle()
        clock.now = 60 * US  # "1" and "2" expired at 50us, "3" expires at 90us
        runner.finish()
        await _settle()
        for task in (late, fresh):
            with pytest.raises(Unavailable, match="^Request timeout expired$"):
                await task
        assert runner.batches[1] == ["3"]
        runner.finish()
        await asyncio.gather(first, newer)
        assert sched.statistics().timed_out == 2

    asyncio.run(main())


def test_full_queue_rejects_at_once():
    async def main():
        runner = FakeRunner("a")
        sched = _batcher([runner], default_queue_policy=QueuePolicy(max_queue_size=1))
        tasks = _start(sched, _req(0), _req(1))
        await _settle()
        with pytest.raises(Unavailable, match="Exceeds maximum queue size"):
            await sched.submit(_req(2))
        runner.finish()
        await _settle()
        runner.finish()
        await asyncio.gather(*tasks)

    asyncio.run(main())


def test_wrong_number_of_responses_fails_the_batch():
    async def main():
        runner = FakeRunner("a")
        sched = _batcher([runner])
        task = _start(sched, _req(0))[0]
        await _settle()
        runner.finish([])
        with pytest.raises(InternalError, match="returned 0 responses for 1 requests"):
            await task

    asyncio.run(main())


def test_codec_packs_the_batch_and_unpacks_one_response_per_request():
    class Concat:
        def pack(self, requests):
            return [InferRequest("m", id="+".join(r.id for r in requests))]

        def unpack(self, requests, responses):
            (merged,) = responses
            return [InferResponse("m", "1", f"{r.id}<{merged.id}") for r in requests]

    async def main():
        runner = FakeRunner("a")
        policy = BatchPolicy(BatchingConfig(max_batch_size=4))
        sched = DynamicBatcher(
            [runner], policy, clock=FakeClock(), timer=FakeTimer(), codec=Concat()
        )
        tasks = _start(sched, _req(0))
        await _settle()
        tasks += _start(sched, _req(1), _req(2))
        runner.finish()
        await _settle()
        assert runner.batches == [["0"], ["1+2"]]
        runner.finish()
        results = await asyncio.gather(*tasks)
        assert [r.id for r in results] == ["0<0", "1<1+2", "2<1+2"]

    asyncio.run(main())


@pytest.mark.parametrize("new_loop", [asyncio.new_event_loop, uvloop.new_event_loop])
def test_default_timer_sends_at_the_policy_deadline_and_is_released_on_close(new_loop):
    delay_ns = 20_000_000

    async def main():
        runner = FakeRunner("a")
        policy = BatchPolicy(BatchingConfig(max_batch_size=8, max_queue_delay_us=delay_ns // US))
        sched = DynamicBatcher([runner], policy)  # real clock, real DeadlineTimer
        start = time.monotonic_ns()
        first = _start(sched, _req(0))[0]
        await _settle()
        assert sched._wake.armed and isinstance(sched._wake._timer, DeadlineTimer)
        assert runner.batches == []
        while not runner.batches and time.monotonic_ns() - start < 5_000_000_000:
            await asyncio.sleep(0.001)
        assert time.monotonic_ns() - start >= delay_ns
        assert runner.batches == [["0"]]
        runner.finish()
        assert (await first).id == "0"
        # One waiting out its delay when the model unloads: failed, timer disarmed, freed.
        second = _start(sched, _req(1))[0]
        await _settle()
        timer = sched._wake._timer
        sched.fail_all(Unavailable("unloading"))
        sched.close()
        assert not sched._wake.armed
        with pytest.raises(Unavailable, match="unloading"):
            await second
        with pytest.raises(RuntimeError, match="closed"):
            timer(time.monotonic_ns(), lambda: None)

    loop = new_loop()
    try:
        loop.run_until_complete(main())
    finally:
        loop.close()


def test_arrivals_during_the_delay_are_polled_once_per_loop_turn():
    async def main():
        runner, timer = FakeRunner("a"), FakeTimer()
        sched = _batcher([runner], timer=timer, max_batch_size=4, max_queue_delay_us=100)
        waiters = [sched.submit(_req(0))]
        assert timer.pending() == [100 * US]  # the policy waits out the delay
        waiters += [sched.submit(_req(i)) for i in (1, 2, 3)]
        assert runner.batches == []  # a full batch, but looked at after this turn
        await asyncio.sleep(0)
        assert runner.batches == [["0", "1", "2", "3"]]
        runner.finish()
        assert [(await w).id for w in waiters] == ["0", "1", "2", "3"]

    asyncio.run(main())


def test_an_arrival_after_the_deadline_sends_the_batch_before_the_timer_fires():
    """A long loop turn of arrivals must not stretch the queue delay: the first arrival
    past the deadline sends the waiting batch (with itself) and disarms the timer."""

    async def main():
        runner, clock, timer = FakeRunner("a"), FakeClock(), FakeTimer()
        sched = _batcher([runner], clock, timer, max_batch_size=8, max_queue_delay_us=100)
        waiters = [sched.submit(_req(0))]
        clock.now = 60 * US
        waiters.append(sched.submit(_req(1)))
        assert runner.batches == [] and timer.pending() == [100 * US]
        clock.now = 100 * US  # the delay ran out; the timer has not fired yet
        waiters.append(sched.submit(_req(2)))
        assert runner.batches == [["0", "1", "2"]]
        assert timer.pending() == []
        clock.now = 120 * US
        waiters.append(sched.submit(_req(3)))  # the runner is busy: it waits
        runner.finish()
        await _settle()
        assert timer.pending() == [220 * US]  # its own delay, from its own arrival
        clock.now = 220 * US
        timer.fire()
        assert runner.batches == [["0", "1", "2"], ["3"]]
        runner.finish()
        assert [(await w).id for w in waiters] == ["0", "1", "2", "3"]
        stats = sched.statistics()
        assert stats.executions == 2 and stats.queue_ns == (100 + 40 + 0 + 100) * US

    asyncio.run(main())


@pytest.mark.serial
def test_answered_requests_leave_no_cyclic_garbage():
    """Each request is freed by reference counting once answered: a queue entry and its
    caller's completion must not keep each other alive for the cycle collector."""

    async def main():
        runner = FakeRunner("a")
        sched = _batcher([runner])
        gc.collect()
        gc.disable()
        try:
            for _ in range(3):
                waiters = [sched.submit(_req(i)) for i in range(4)]
                while runner.inflight:
                    runner.finish()
                    await _settle()
                assert [w.result().id for w in waiters] == ["0", "1", "2", "3"]
                del waiters
            assert gc.collect() == 0
        finally:
            gc.enable()

    asyncio.run(main())
