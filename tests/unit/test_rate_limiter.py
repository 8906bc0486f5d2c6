"""The rate limiter with fake runners: resources (sizes, sharing, devices, refusals in
Triton's words) and the order in which waiting instances run (Triton 2.51's)."""

from __future__ import annotations

import asyncio

import pytest

from tritium.config.rate_limiter import GroupRateLimiter, ResourceUse, group_rate_limiter
from tritium.core import InferRequest
from tritium.core.errors import InvalidArgument, Unavailable
from tritium.scheduling import (
    DefaultScheduler,
    LimitedRunner,
    RateLimiter,
    SequenceBatcher,
    SequenceConfig,
)
from tritium.scheduling.rate_limit_resources import (
    EVERY_DEVICE,
    GLOBAL,
    ResourcePool,
    explicit_resources,
    parse_resource_option,
)
from tritium.testing import FakeClock, FakeRunner

REFUSAL = (
    'Resource count for "R1" is limited to 1 which will prevent scheduling of one or more '
    "model instances, the minimum required count is 2"
)


def _limits(priority: int = 1, **resources: int) -> GroupRateLimiter:
    return GroupRateLimiter(tuple(ResourceUse(n, c) for n, c in resources.items()), priority)


def _req(model: str, i: int) -> InferRequest:
    return InferRequest(model, id=f"{model}{i}")


async def _settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


# -- resources ---------------------------------------------------------------------------


def test_without_listed_counts_each_resource_has_the_most_one_instance_needs():
    pool = ResourcePool()
    pool.register({"a": {(0, "R1"): 4, (0, "R2"): 4}})
    pool.register({"b": {(0, "R2"): 5, (0, "R3"): 10}, "c": {(0, "R1"): 1, (0, "R3"): 7}})
    # Triton's documented example: A [R1 4, R2 4], B [R2 5, R3 10], C [R1 1, R3 7].
    assert pool.limits() == {(0, "R1"): 4, (0, "R2"): 5, (0, "R3"): 10}
    pool.unregister(["b"])
    assert pool.limits() == {(0, "R1"): 4, (0, "R2"): 4, (0, "R3"): 7}


def test_listed_counts_refuse_a_need_larger_than_them_in_tritons_words():
    pool = ResourcePool(explicit_resources(("R1:1",)))
    pool.register({"small": {(0, "R1"): 1}})
    with pytest.raises(InvalidArgument) as caught:
        pool.register({"big0": {(0, "R1"): 2}, "big1": {(0, "R1"): 1}})
    assert caught.value.message == REFUSAL
    # All or none: the refused version's instances do not count.
    assert pool.limits() == {(0, "R1"): 1}
    assert pool.try_take({(0, "R1"): 1}) and not pool.try_take({(0, "R1"): 1})


def test_a_resource_nobody_listed_has_no_copies_once_any_is_listed():
    pool = ResourcePool(explicit_resources(("R1:4",)))
    with pytest.raises(InvalidArgument, match='"R2" is limited to 0 .* required count is 1'):
        pool.register({"a": {(0, "R2"): 1}})


def test_listed_counts_per_device_every_device_and_global():
    # Triton's example: R1:10, R2:5:0, R2:8:1, R3:2 (R3 global in a model).
    pool = ResourcePool(explicit_resources(("R1:10", "R2:5:0", "R2:8:1", "R3:2")))
    pool.register(
        {
            "d0": {(0, "R1"): 1, (0, "R2"): 1, (GLOBAL, "R3"): 1},
            "d1": {(1, "R1"): 1, (1, "R2"): 1},
        }
    )
    assert pool.limits() == {
        (0, "R1"): 10,
        (0, "R2"): 5,
        (GLOBAL, "R3"): 2,
        (1, "R1"): 10,
        (1, "R2"): 8,
    }


def test_a_resource_both_global_and_per_device_is_refused():
    pool = ResourcePool()
    pool.register({"a": {(GLOBAL, "R1"): 1}})
    with pytest.raises(InvalidArgument) as caught:
        pool.register({"b": {(0, "R1"): 1}})
    assert caught.value.message == (
        'Resource "R1" is present as both global and device-specific resource in the model '
        "configuration."
    )


def test_rate_limit_resource_values():
    assert parse_resource_option("R1:4") == ("R1", 4, EVERY_DEVICE)
    assert parse_resource_option("R1:4:1") == ("R1", 4, 1)
    for bad in ("R1", "R1:x", ":4", "R1:4:0:1", "R1:-1", "R1:2:-3"):
        with pytest.raises(ValueError, match="--rate-limit-resource option format is"):
            parse_resource_option(bad)


def test_group_settings_from_a_config():
    group = {
        "rate_limiter": {
            "resources": [
                {"name": "R1", "count": 2},
                {"name": "G", "count": 1, "global": True},
                {"name": "R1", "count": 3},
            ],
            "priority": 0,
        }
    }
    limits = group_rate_limiter(group)
    assert limits.priority == 1  # Triton reads 0 as 1
    assert set(limits.resources) == {ResourceUse("R1", 3), ResourceUse("G", 1, True)}
    assert group_rate_limiter({}) == GroupRateLimiter()


def test_off_means_no_limiter_and_instances_without_resources_are_not_wrapped():
    assert RateLimiter.for_mode("off", ("R1:1",)) is None
    limiter = RateLimiter.for_mode("execution_count")
    assert limiter is not None
    plain, limited = FakeRunner("plain"), FakeRunner("limited")
    runners = limiter.register([(plain, GroupRateLimiter(), 0), (limited, _limits(R1=1), 0)])
    assert runners[0] is plain and isinstance(runners[1], LimitedRunner)


# -- who runs, and when -------------------------------------------------------------------


class _Models:
    """Models of one fake instance each, all under one limiter; ``started`` lists request
    ids in the order their batches reached an instance."""

    def __init__(self, limiter: RateLimiter, **models: GroupRateLimiter) -> None:
        self.fakes = {name: FakeRunner(name) for name in models}
        self.schedulers = {}
        for name, limits in models.items():
            runners = limiter.register([(self.fakes[name], limits, 0)])
            self.schedulers[name] = DefaultScheduler(runners)
        self.pending: list = []

    def send(self, model: str, i: int) -> None:
        self.pending.append(self.schedulers[model].submit(_req(model, i)))

    def busy(self) -> list[str]:
        return sorted(name for name, f in self.fakes.items() if f.inflight)

    async def run_all(self) -> list[str]:
        """Finish batches one by one (whichever instance runs) until none is left."""
        order: list[str] = []
        await _settle()
        while True:
            running = [f for f in self.fakes.values() if f.inflight]
            if not running:
                break
            assert len(running) == 1, "only one may hold R1"
            order.append(running[0].batches[-1][0])
            running[0].finish()
            await _settle()
        await asyncio.gather(*self.pending)
        return order


def test_priority_1_requests_all_run_before_priority_10_ones_as_in_triton():
    async def main():
        limiter = RateLimiter()
        models = _Models(limiter, c=_limits(R1=1), b=_limits(10, R1=1), a=_limits(1, R1=1))
        models.send("c", 0)  # holds R1 while the others queue
        for i in range(1, 4):
            models.send("b", i)
        for i in range(4, 7):
            models.send("a", i)
        assert await models.run_all() == ["c0", "a4", "a5", "a6", "b1", "b2", "b3"]

    asyncio.run(main())


def test_equal_priorities_take_turns_and_priority_2_gets_half_the_turns():
    async def main():
        limiter = RateLimiter()
        models = _Models(limiter, c=_limits(R1=1), d=_limits(1, R1=1), a=_limits(1, R1=1))
        models.send("c", 0)
        for i in range(1, 4):
            models.send("d", i)
        for i in range(4, 7):
            models.send("a", i)
        # Equal ranks: the one waiting longest first, then turns.
        assert await models.run_all() == ["c0", "d1", "a4", "d2", "a5", "d3", "a6"]

        limiter = RateLimiter()
        models = _Models(limiter, c=_limits(R1=1), e=_limits(2, R1=1), a=_limits(1, R1=1))
        models.send("c", 0)
        for i in range(1, 5):
            models.send("e", i)
        for i in range(5, 9):
            models.send("a", i)
        # Ranks (runs + 1) x priority: a 1, e 2, a 2 (a waited less), e 4 ...
        assert await models.run_all() == ["c0", "a5", "e1", "a6", "a7", "e2", "a8", "e3", "e4"]

    asyncio.run(main())


def test_resources_are_shared_across_models_and_counted_per_device_or_globally():
    async def main():
        limiter = RateLimiter(explicit_resources(("R1:2", "G:1")))
        fakes = [FakeRunner(f"i{n}") for n in range(3)]
        runners = limiter.register([(f, _limits(R1=1), 0) for f in fakes])
        schedulers = [DefaultScheduler([r]) for r in runners]
        pending = [s.submit(_req("m", n)) for n, s in enumerate(schedulers)]
        await _settle()
        assert sum(1 for f in fakes if f.inflight) == 2  # two copies of R1 on device 0
        assert limiter.statistics().waiting == 1
        next(f for f in fakes if f.inflight).finish()
        await _settle()
        assert sum(1 for f in fakes if f.inflight) == 2
        for f in fakes:
            if f.inflight:
                f.finish()
        await _settle()
        await asyncio.gather(*pending)
        assert limiter.statistics().taken == {}

        # One copy of R1 per device: instances on devices 0 and 1 run side by side, but a
        # global resource has one copy for the whole server.
        per_device = RateLimiter()
        on0, on1 = FakeRunner("on0"), FakeRunner("on1")
        r0, r1 = per_device.register([(on0, _limits(R1=1), 0), (on1, _limits(R1=1), 1)])
        global_one = GroupRateLimiter((ResourceUse("G", 1, True),))
        g0, g1 = FakeRunner("g0"), FakeRunner("g1")
        q0, q1 = per_device.register([(g0, global_one, 0), (g1, global_one, 1)])
        futures = [DefaultScheduler([r]).submit(_req("m", 0)) for r in (r0, r1, q0, q1)]
        await _settle()
        assert on0.inflight and on1.inflight
        assert bool(g0.inflight) != bool(g1.inflight)
        for fake in (on0, on1, g0, g1, g0, g1):
            if fake.inflight:
                fake.finish()
                await _settle()
        await asyncio.gather(*futures)

    asyncio.run(main())


def test_the_first_in_line_is_not_overtaken_by_smaller_needs():
    async def main():
        limiter = RateLimiter(explicit_resources(("R1:2",)))
        small1, big, small2 = FakeRunner("s1"), FakeRunner("big"), FakeRunner("s2")
        rs1, rbig, rs2 = limiter.register(
            [(small1, _limits(R1=1), 0), (big, _limits(R1=2), 0), (small2, _limits(R1=1), 0)]
        )
        f1 = DefaultScheduler([rs1]).submit(_req("s", 1))
        await _settle()
        fbig = DefaultScheduler([rbig]).submit(_req("b", 1))
        f2 = DefaultScheduler([rs2]).submit(_req("s", 2))
        await _settle()
        # One copy is free, but the big instance waits first: the small one waits too.
        assert small1.inflight and not big.inflight and not small2.inflight
        small1.finish()
        await _settle()
        assert big.inflight and not small2.inflight
        big.finish()
        await _settle()
        small2.finish()
        await asyncio.gather(f1, fbig, f2)

    asyncio.run(main())


def test_unloading_fails_a_waiting_batch_and_frees_what_it_counted():
    async def main():
        limiter = RateLimiter(explicit_resources(("R1:1",)))
        holder, waiter = FakeRunner("holder"), FakeRunner("waiter")
        (rh,) = limiter.register([(holder, _limits(R1=1), 0)])
        (rw,) = limiter.register([(waiter, _limits(R1=1), 0)])
        held = DefaultScheduler([rh]).submit(_req("h", 0))
        waiting = DefaultScheduler([rw]).submit(_req("w", 0))
        await _settle()
        assert rw.busy and not waiter.inflight
        limiter.unregister([rw], "is unloading")
        with pytest.raises(Unavailable, match="instance 'waiter' is unloading"):
            await waiting
        assert not rw.busy
        holder.finish()
        await held
        assert limiter.statistics().taken == {}

    asyncio.run(main())


def test_a_cancel_while_waiting_reaches_the_instance_when_the_batch_starts():
    async def main():
        limiter = RateLimiter(explicit_resources(("R1:1",)))
        holder, waiter = FakeRunner("holder"), FakeRunner("waiter")
        rh, rw = limiter.register([(holder, _limits(R1=1), 0), (waiter, _limits(R1=1), 0)])
        held = DefaultScheduler([rh]).submit(_req("h", 0))
        request = _req("w", 0)
        waiting = DefaultScheduler([rw]).submit(request)
        await _settle()
        rw.cancel(request)
        assert waiter.cancelled == []
        holder.finish()
        await _settle()
        assert waiter.cancelled == [request]
        waiter.finish()
        await asyncio.gather(held, waiting)

    asyncio.run(main())


def test_an_instance_down_when_granted_fails_the_batch_and_gives_the_resources_back():
    async def main():
        limiter = RateLimiter(explicit_resources(("R1:1",)))
        holder, down = FakeRunner("holder"), FakeRunner("down")
        rh, rd = limiter.register([(holder, _limits(R1=1), 0), (down, _limits(R1=1), 0)])
        held = DefaultScheduler([rh]).submit(_req("h", 0))
        waiting = DefaultScheduler([rd]).submit(_req("d", 0))
        await _settle()
        down.running = False
        holder.finish()
        with pytest.raises(Unavailable, match="not running"):
            await waiting
        await held
        assert limiter.statistics().taken == {}

    asyncio.run(main())


def test_a_sequence_batch_waits_for_the_resource_of_its_slots_instance():
    config = {
        "name": "s",
        "max_batch_size": 4,
        "output": [{"name": "OUT"}],
        "sequence_batching": {"direct": {}, "max_sequence_idle_microseconds": 1_000_000},
    }

    async def main():
        limiter = RateLimiter(explicit_resources(("R1:1",)))
        holder, seq = FakeRunner("holder"), FakeRunner("seq")
        rh, rs = limiter.register([(holder, _limits(R1=1), 0), (seq, _limits(R1=1), 0)])
        held = DefaultScheduler([rh]).submit(_req("h", 0))
        batcher = SequenceBatcher(
            [rs], SequenceConfig.from_config(config), clock=FakeClock(), timer=lambda *_: None
        )
        first = batcher.submit(InferRequest("s", id="s1", correlation_id=7, flags=1))
        await _settle()
        assert rs.busy and not seq.inflight  # the batch waits for R1
        holder.finish()
        await _settle()
        assert seq.batches == [["s1"]]
        seq.finish()
        await asyncio.gather(held, first)

    asyncio.run(main())
