"""BatchPolicy's incremental walk against a naive model that re-walks on every poll.

The naive model states Triton's rules directly (walk the queue from the front, apply
timeouts to what the walk reaches, stop at the first request that does not fit, then
decide); BatchPolicy keeps its walk between polls for speed. Random operation sequences
must give identical decisions.
"""

from __future__ import annotations

import random

import numpy as np
import pytest

from tritium.core import InferRequest, InputTensor
from tritium.core.errors import Unavailable
from tritium.scheduling.batch_config import BatchingConfig, QueuePolicy, TimeoutAction
from tritium.scheduling.batch_policy import BatchPolicy

US = 1000


class _Naive:
    def __init__(self, config: BatchingConfig) -> None:
        self.max_batch = max(1, config.max_batch_size)
        preferred = config.preferred_batch_sizes or (self.max_batch,)
        self.preferred = set(preferred)
        self.max_preferred = max(preferred)
        self.delay = config.max_queue_delay_us * US
        count = config.priority_levels
        if count == 0:
            self.policies = [config.default_queue_policy]
            self.default = 0
        else:
            self.policies = [
                config.priority_queue_policies.get(i, config.default_queue_policy)
                for i in range(1, count + 1)
            ]
            self.default = config.default_priority_level - 1
        self.main: list[list[dict]] = [[] for _ in self.policies]
        self.delayed: list[list[dict]] = [[] for _ in self.policies]
        self.check = bool(config.equal_shape_inputs)
        self.cap = config.queue_cap

    def enqueue(self, request: InferRequest, now: int) -> dict:
        p = request.priority
        level = p - 1 if 0 < p <= len(self.policies) else self.default
        policy = self.policies[level]
        size = policy.max_queue_size or self.cap
        if len(self.main[level]) + len(self.delayed[level]) >= size:
            raise Unavailable("Exceeds maximum queue size")
        timeout = policy.default_timeout_us
        if policy.allow_timeout_override and 0 < request.timeout_us < timeout:
            timeout = request.timeout_us
        entry = {
            "id": request.id,
            "rows": request.batch_size,
            "enq": now,
            "deadline": now + timeout * US if timeout else 0,
            "shape": request.inputs[0].shape[1:],
        }
        self.main[level].append(entry)
        return entry

    def discard(self, entry: dict) -> None:
        for queues in (self.main, self.delayed):
            for q in queues:
                if entry in q:
                    q.remove(entry)

    def poll(self, now: int, can: bool):
        if not can:
            return None, [], None
        pending: list[dict] = []
        rejected: list[str] = []
        best = 0
        stopped = False

        def consider(e: dict) -> bool:
            nonlocal best
            if pending:
                total = sum(x["rows"] for x in pending) + e["rows"]
                if total > self.max_preferred and not best:
                    best = len(pending)
                if total > self.max_batch:
                    return False
                if self.check and e["shape"] != pending[0]["shape"]:
                    return False
            pending.append(e)
            if sum(x["rows"] for x in pending) in self.preferred:
                best = len(pending)
            return True

        for level, policy in enumerate(self.policies):
            main = self.main[level]
            i = 0
            while i < len(main):
                e = main[i]
                if e["deadline"] and now >= e["deadline"]:
                    main.pop(i)
                    if policy.timeout_action is TimeoutAction.DELAY:
                        e["deadline"] = 0
                        self.delayed[level].append(e)
                    else:
                        rejected.append(e["id"])
                    continue
                if not consider(e):
                    stopped = True
                    break
                i += 1
            if stopped:
                break
            for e in self.delayed[level]:
                if not consider(e):
                    stopped = True
                    break
            if stopped:
                break
        if not pending:
            return None, rejected, None
        oldest = min(e["enq"] for e in pending)
        rows = sum(e["rows"] for e in pending)
        exceeded = self.delay != 0 and now - oldest >= self.delay
        if best and not exceeded:
            count = best
        elif stopped or exceeded or self.delay == 0 or rows >= self.max_preferred:
            count = len(pending)
        else:
            wake = oldest + self.delay
            deadlines = [e["deadline"] for e in pending if e["deadline"]]
            if deadlines:
                wake = min(wake, min(deadlines))
            return None, rejected, wake
        batch = pending[:count]
        for e in batch:
            self.discard(e)
        return [e["id"] for e in batch], rejected, None

    def queued(self) -> int:
        return sum(map(len, self.main)) + sum(map(len, self.delayed))


def _random_config(rng: random.Random, cap: int) -> BatchingConfig:
    max_batch = rng.randint(1, 6)
    preferred = tuple(
        sorted(rng.sample(range(1, max_batch + 1), rng.randint(0, min(3, max_batch))))
    )

    def queue_policy() -> QueuePolicy:
        return QueuePolicy(
            rng.choice(list(TimeoutAction)),
            rng.choice([0, 0, 30, 120]),
            rng.random() < 0.5,
            rng.choice([0, 0, 4, 10]),
        )

    levels = rng.choice([0, 0, 3])
    return BatchingConfig(
        max_batch_size=max_batch,
        preferred_batch_sizes=preferred,
        max_queue_delay_us=rng.choice([0, 50, 200]),
        priority_levels=levels,
        default_priority_level=rng.randint(1, levels) if levels else 0,
        default_queue_policy=queue_policy(),
        priority_queue_policies={2: queue_policy()} if levels else {},
        equal_shape_inputs=frozenset({"IN"}) if rng.random() < 0.5 else frozenset(),
        queue_cap=cap,
    )


def _check(seed: int, steps: int, cap: int, discard: float, dispatch: float) -> None:
    rng = random.Random(seed)
    config = _random_config(rng, cap)
    policy, naive = BatchPolicy(config), _Naive(config)
    now = 0
    live: list[tuple] = []
    for step in range(steps):
        now += rng.choice([0, 0, 5, 20, 60]) * US
        op = rng.random()
        if op < 0.5:
            rows = rng.randint(1, 3)
            request = InferRequest(
                "m",
                id=str(step),
                inputs=[InputTensor("IN", "FP32", (rows, rng.randint(1, 2)), np.zeros(0))],
                priority=rng.choice([0, 1, 2, 3, 5]),
                timeout_us=rng.choice([0, 10, 60, 500]),
                batch_size=rows,
            )
            try:
                expected = naive.enqueue(request, now)
            except Unavailable:
                with pytest.raises(Unavailable):
                    policy.enqueue(request, now)
                continue
            live.append((policy.enqueue(request, now), expected))
        elif op < 0.5 + discard and live:
            entry, expected = live.pop(rng.randrange(len(live)))
            if policy.discard(entry):
                naive.discard(expected)
        else:
            can = rng.random() < dispatch
            decision = policy.poll(now, can)
            batch, rejected, wake = naive.poll(now, can)
            got = [e.request.id for e in decision.batch] if decision.batch else None
            assert (got, [e.request.id for e in decision.rejected], decision.wake_at_ns) == (
                batch,
                rejected,
                wake,
            ), f"step {step}"
        assert policy.statistics().queued == naive.queued()


@pytest.mark.parametrize("seed", range(300))
def test_incremental_walk_matches_a_full_rewalk(seed: int):
    _check(seed, steps=120, cap=12, discard=0.1, dispatch=0.8)


@pytest.mark.parametrize("seed", range(10))
def test_long_queues_with_many_cancellations_match_a_full_rewalk(seed: int):
    # Deep queues and frequent discards exercise the rebuild of dead-heavy deques.
    _check(seed, steps=1500, cap=400, discard=0.35, dispatch=0.05)
