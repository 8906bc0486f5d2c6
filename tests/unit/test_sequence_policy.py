"""SequencePolicy with a fake clock: slots, ordering, strategies, errors, backlog, idle."""

from __future__ import annotations

import pytest

from tritium.core import InferRequest
from tritium.core.errors import InvalidArgument, Unavailable
from tritium.scheduling.sequence_config import SequenceConfig
from tritium.scheduling.sequence_policy import FLAG_END, FLAG_START, SequencePolicy

US = 1000


def config(**overrides) -> SequenceConfig:
    settings = dict(
        model_name="m",
        strategy="oldest",
        max_batch_size=4,
        slots_per_instance=4,
        max_queue_delay_us=0,
        preferred_batch_sizes=(4,),
        minimum_slot_utilization=0.0,
        preserve_ordering=False,
        max_sequence_idle_us=1_000_000,
    )
    settings.update(overrides)
    return SequenceConfig(**settings)


def req(key, flags=0, rid="") -> InferRequest:
    return InferRequest("m", id=rid or f"{key}:{flags}", correlation_id=key, flags=flags)


def ids(decision) -> list[str]:
    return [entry.request.id for entry in decision.batch]


def test_first_request_must_start_and_id_must_be_set():
    policy = SequencePolicy(config(), 1)
    with pytest.raises(InvalidArgument, match="must specify a non-zero or non-empty correlation ID"):
        policy.enqueue(req(0, FLAG_START), 0, None)
    with pytest.raises(InvalidArgument, match="non-empty correlation ID"):
        policy.enqueue(req("", FLAG_START), 0, None)
    with pytest.raises(
        InvalidArgument,
        match="inference request for sequence 7 to model 'm' must specify the START flag on "
        "the first request of the sequence",
    ):
        policy.enqueue(req(7), 0, None)


def test_one_request_per_sequence_per_batch_in_arrival_order():
    policy = SequencePolicy(config(), 1)
    policy.enqueue(req(1, FLAG_START, "a1"), 0, None)
    policy.enqueue(req(1, 0, "a2"), 1, None)
    policy.enqueue(req("x", FLAG_START, "b1"), 2, None)
    first = policy.poll(0, 10)
    assert ids(first) == ["a1", "b1"]
    assert policy.poll(0, 10).batch is None  # the instance is busy
    policy.completed(0, first.batch, 20)
    assert ids(policy.poll(0, 20)) == ["a2"]


def test_oldest_waits_for_preferred_size_up_to_the_queue_delay():
    policy = SequencePolicy(config(max_queue_delay_us=100), 1)
    policy.enqueue(req(1, FLAG_START), 0, None)
    policy.enqueue(req(2, FLAG_START), 10 * US, None)
    decision = policy.poll(0, 20 * US)
    assert decision.batch is None and decision.wake_at_ns == 100 * US
    policy.enqueue(req(3, FLAG_START), 30 * US, None)
    policy.enqueue(req(4, FLAG_START), 40 * US, None)
    assert len(policy.poll(0, 40 * US).batch) == 4  # preferred size reached: no wait


def test_oldest_picks_the_sequences_with_the_oldest_requests():
    policy = SequencePolicy(config(max_batch_size=2, slots_per_instance=4), 1)
    for key in (1, 2, 3):
        policy.enqueue(req(key, FLAG_START), key, None)
    first = policy.poll(0, 5)
    assert ids(first) == ["1:1", "2:1"]
    policy.enqueue(req(1, 0, "1b"), 6, None)
    policy.completed(0, first.batch, 7)
    assert ids(policy.poll(0, 8)) == ["3:1", "1b"]


def test_oldest_delay_expired_takes_what_is_there():
    policy = SequencePolicy(config(max_queue_delay_us=100), 1)
    policy.enqueue(req(1, FLAG_START), 0, None)
    assert len(policy.poll(0, 100 * US).batch) == 1


def test_direct_batches_slots_in_slot_order_once_utilization_is_met():
    cfg = config(
        strategy="direct", max_queue_delay_us=1000, minimum_slot_utilization=0.5,
        preferred_batch_sizes=(),
    )
    policy = SequencePolicy(cfg, 1)
    policy.enqueue(req(10, FLAG_START), 0, None)  # slot 0
    policy.enqueue(req(11, FLAG_START), 0, None)  # slot 1
    policy.enqueue(req(12, FLAG_START), 0, None)  # slot 2
    first = policy.poll(0, 0)
    assert [e.sequence.slot for e in first.batch] == [0, 1, 2]
    policy.completed(0, first.batch, 1)
    policy.enqueue(req(12, 0, "c2"), 2 * US, None)
    decision = policy.poll(0, 3 * US)  # 1 of 4 slots: under 0.5 utilization
    assert decision.batch is None and decision.wake_at_ns == 1002 * US
    policy.enqueue(req(10, 0, "a2"), 4 * US, None)
    assert ids(policy.poll(0, 5 * US)) == ["a2", "c2"]  # slot order, 2 of 4 slots


def test_sequences_spread_over_instances_and_stay_there():
    policy = SequencePolicy(config(slots_per_instance=2), 2)
    entries = [policy.enqueue(req(k, FLAG_START), 0, None) for k in (1, 2, 3, 4)]
    assert sorted(policy.instance_of(e) for e in entries) == [0, 0, 1, 1]
    follow = policy.enqueue(req(3, 0), 1, None)
    assert policy.instance_of(follow) == policy.instance_of(entries[2])


def test_more_sequences_than_slots_wait_in_the_backlog_until_one_ends():
    policy = SequencePolicy(config(max_batch_size=0, slots_per_instance=1, strategy="direct"), 1)
    policy.enqueue(req(1, FLAG_START, "a"), 0, None)
    waiting = policy.enqueue(req(2, FLAG_START, "b"), 1, None)
    assert policy.instance_of(waiting) == -1
    assert policy.statistics().backlog == 1
    policy.enqueue(req(2, 0, "b2"), 2, None)  # continues while in the backlog
    first = policy.poll(0, 3)
    assert ids(first) == ["a"]
    policy.enqueue(req(1, FLAG_END, "a-end"), 4, None)
    policy.completed(0, first.batch, 5)
    end = policy.poll(0, 6)
    assert ids(end) == ["a-end"]
    policy.completed(0, end.batch, 7)  # sequence 1 ended: 2 takes the slot
    assert policy.instance_of(waiting) == 0
    assert ids(policy.poll(0, 8)) == ["b"]
    with pytest.raises(InvalidArgument, match="START flag"):
        policy.enqueue(req(1), 9, None)


def test_start_on_a_running_sequence_restarts_it_in_place():
    policy = SequencePolicy(config(), 1)
    policy.enqueue(req(1, FLAG_START, "a"), 0, None)
    policy.enqueue(req(1, 0, "b"), 1, None)
    restart = policy.enqueue(req(1, FLAG_START, "c"), 2, None)
    assert restart.sequence.slot == 0 and restart.start
    order = []
    for now in (3, 4, 5):
        decision = policy.poll(0, now)
        order += ids(decision)
        policy.completed(0, decision.batch, now)
    assert order == ["a", "b", "c"]
    assert policy.statistics().active == 1


def test_end_then_start_reuses_the_id_and_a_bare_request_after_end_is_refused():
    policy = SequencePolicy(config(), 1)
    policy.enqueue(req(5, FLAG_START | FLAG_END, "only"), 0, None)
    with pytest.raises(InvalidArgument, match="START flag"):
        policy.enqueue(req(5), 1, None)
    again = policy.enqueue(req(5, FLAG_START, "again"), 2, None)
    first = policy.poll(0, 3)
    assert ids(first) == ["only"]
    policy.completed(0, first.batch, 4)  # the restart keeps the slot
    assert again.sequence.instance == 0
    assert ids(policy.poll(0, 5)) == ["again"]


def test_idle_sequences_are_released_and_their_next_request_refused():
    policy = SequencePolicy(config(max_sequence_idle_us=1000), 1)
    policy.enqueue(req(1, FLAG_START), 0, None)
    policy.enqueue(req(2, FLAG_START), 500 * US, None)
    batch = policy.poll(0, 500 * US).batch
    policy.completed(0, batch, 600 * US)
    released, next_ns = policy.expire(1000 * US)
    assert released == [] and next_ns == 1600 * US
    released, next_ns = policy.expire(1600 * US)
    assert {s.key for s in released} == {1, 2} and next_ns is None
    assert policy.statistics().idle_released == 2
    assert policy.statistics().active == 0
    with pytest.raises(InvalidArgument, match="START flag"):
        policy.enqueue(req(1), 1700 * US, None)


def test_a_sequence_waiting_for_its_instance_is_not_idle():
    policy = SequencePolicy(config(max_sequence_idle_us=1000, max_batch_size=1), 1)
    policy.enqueue(req(1, FLAG_START), 0, None)
    policy.enqueue(req(2, FLAG_START), 0, None)
    running = policy.poll(0, 0).batch  # sequence 1 runs for longer than the idle time
    released, _ = policy.expire(5000 * US)
    assert released == []
    policy.completed(0, running, 5000 * US)
    assert ids(policy.poll(0, 5000 * US)) == ["2:1"]


def test_queued_requests_are_bounded():
    policy = SequencePolicy(config(max_queued=2), 1)
    policy.enqueue(req(1, FLAG_START), 0, None)
    policy.enqueue(req(2, FLAG_START), 0, None)
    with pytest.raises(Unavailable, match="Exceeds maximum queue size"):
        policy.enqueue(req(3, FLAG_START), 0, None)


def test_batched_models_take_one_row_per_request():
    policy = SequencePolicy(config(), 1)
    request = req(1, FLAG_START)
    request.batch_size = 2
    with pytest.raises(InvalidArgument, match="must specify batch-size 1"):
        policy.enqueue(request, 0, None)


def test_a_discarded_start_passes_its_restart_to_the_next_request():
    policy = SequencePolicy(config(), 1)
    first = policy.enqueue(req(1, FLAG_START, "a"), 0, None)
    batch = policy.poll(0, 0).batch
    restart = policy.enqueue(req(1, FLAG_START, "b"), 1, None)
    follow = policy.enqueue(req(1, 0, "c"), 2, None)
    assert policy.discard(restart)
    assert not policy.discard(first)  # running, not queued
    policy.completed(0, batch, 3)
    assert ids(policy.poll(0, 4)) == ["c"] and follow.start


def test_drain_forgets_everything():
    policy = SequencePolicy(config(slots_per_instance=1), 1)
    policy.enqueue(req(1, FLAG_START), 0, None)
    policy.enqueue(req(2, FLAG_START), 0, None)  # backlog
    assert len(policy.drain()) == 2
    stats = policy.statistics()
    assert (stats.active, stats.backlog, stats.queued) == (0, 0, 0)
    with pytest.raises(InvalidArgument):
        policy.enqueue(req(1), 1, None)
    policy.enqueue(req(1, FLAG_START), 1, None)
    assert policy.statistics().slots == (1,)
