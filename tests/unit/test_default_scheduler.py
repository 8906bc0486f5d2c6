"""DefaultScheduler with fake runners: dispatch, queueing, bounds, failures, cancellation."""

from __future__ import annotations

import asyncio

import pytest

from tritium.core import InferRequest
from tritium.core.errors import Unavailable
from tritium.scheduling import DefaultScheduler
from tritium.testing import FakeRunner


async def _settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


def _req(i: int) -> InferRequest:
    return InferRequest("m", id=str(i))


def test_requests_run_on_free_runners_then_queue_in_order():
    async def main():
        a, b = FakeRunner("a"), FakeRunner("b")
        sched = DefaultScheduler([a, b])
        tasks = [asyncio.ensure_future(sched.submit(_req(i))) for i in range(4)]
        await _settle()
        assert len(a.inflight) == 1 and len(b.inflight) == 1
        assert sched.statistics().queued == 2
        b.finish()
        await _settle()
        assert [r.id for r in b.inflight[0][0]] == ["2"]  # FIFO
        for runner in (a, b, a, b):
            if runner.inflight:
                runner.finish()
                await _settle()
        results = await asyncio.gather(*tasks)
        assert [r.id for r in results] == ["0", "1", "2", "3"]
        assert sched.statistics().executions == 4

    asyncio.run(main())


def test_full_queue_rejects_with_triton_message():
    async def main():
        runner = FakeRunner("a")
        sched = DefaultScheduler([runner], max_queue=1)
        first = asyncio.ensure_future(sched.submit(_req(0)))
        second = asyncio.ensure_future(sched.submit(_req(1)))
        await _settle()
        with pytest.raises(Unavailable, match="Exceeds maximum queue size"):
            await sched.submit(_req(2))
        runner.finish()
        await _settle()
        runner.finish()
        await asyncio.gather(first, second)

    asyncio.run(main())


def test_dead_runner_fails_its_request_and_is_reused_after_restart():
    async def main():
        runner = FakeRunner("a")
        sched = DefaultScheduler([runner])
        first = asyncio.ensure_future(sched.submit(_req(0)))
        queued = asyncio.ensure_future(sched.submit(_req(1)))
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


def test_failed_restart_fails_queued_requests_when_no_runner_is_left():
    async def main():
        runner = FakeRunner("a")
        sched = DefaultScheduler([runner])
        first = asyncio.ensure_future(sched.submit(_req(0)))
        queued = asyncio.ensure_future(sched.submit(_req(1)))
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


def test_cancelled_caller_is_forwarded_and_runner_stays_consistent():
    async def main():
        runner = FakeRunner("a")
        sched = DefaultScheduler([runner])
        first = asyncio.ensure_future(sched.submit(_req(0)))
        queued = asyncio.ensure_future(sched.submit(_req(1)))
        third = asyncio.ensure_future(sched.submit(_req(2)))
        await _settle()
        first.cancel()
        queued.cancel()  # cancelled while queued: never dispatched
        await _settle()
        assert [r.id for r in runner.cancelled] == ["0"]
        runner.finish()  # the cancelled batch still completes on the instance
        await _settle()
        assert [r.id for r in runner.inflight[0][0]] == ["2"]
        runner.finish()
        assert (await third).id == "2"

    asyncio.run(main())


def test_a_request_given_to_an_idle_instance_that_died_waits_for_its_restart():
    """Triton-like under worker kills: a request that never reached the dead instance (it
    died while idle, its exit not yet noticed) is not failed with "is not running"; it waits
    at the head of the queue and runs once the instance is back."""

    async def main():
        runner = FakeRunner("a")
        sched = DefaultScheduler([runner])
        runner.running = False  # died while idle
        first = asyncio.ensure_future(sched.submit(_req(0)))
        second = asyncio.ensure_future(sched.submit(_req(1)))
        await _settle()
        assert not first.done() and not second.done() and runner.batches == []
        assert sched.statistics().queued == 2
        runner.revive()
        await _settle()
        assert runner.batches == [["0"]]  # the first keeps its place
        runner.finish()
        await _settle()
        runner.finish()
        assert [r.id for r in await asyncio.gather(first, second)] == ["0", "1"]

    asyncio.run(main())


def test_a_request_refused_by_a_dead_instance_goes_to_a_live_one():
    async def main():
        a, b = FakeRunner("a"), FakeRunner("b")
        sched = DefaultScheduler([a, b])
        b.running = False  # idle list pops b first; it is down
        task = asyncio.ensure_future(sched.submit(_req(0)))
        await _settle()
        assert a.batches == [["0"]] and b.batches == [] and len(b.ready_callbacks) == 1
        a.finish()
        assert (await task).id == "0"

    asyncio.run(main())


def test_a_request_running_on_an_instance_that_dies_fails_it_was_lost():
    async def main():
        runner = FakeRunner("a")
        sched = DefaultScheduler([runner])
        running = asyncio.ensure_future(sched.submit(_req(0)))
        queued = asyncio.ensure_future(sched.submit(_req(1)))
        await _settle()
        runner.die()
        with pytest.raises(Unavailable, match="exited unexpectedly"):
            await running
        assert not queued.done()  # never handed to the dead instance: waits
        runner.revive()
        await _settle()
        runner.finish()
        assert (await queued).id == "1"

    asyncio.run(main())


def test_queued_requests_fail_when_no_instance_can_restart():
    async def main():
        runner = FakeRunner("a")
        sched = DefaultScheduler([runner])
        runner.running = False
        task = asyncio.ensure_future(sched.submit(_req(0)))
        await _settle()
        for callback in runner.failure_callbacks:
            callback()
        with pytest.raises(Unavailable, match="no instance of the model is running"):
            await task

    asyncio.run(main())
