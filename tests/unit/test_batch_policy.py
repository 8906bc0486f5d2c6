"""BatchPolicy driven with integer timestamps: batch forming, priorities, queue policies.

Each behaviour is Triton's DynamicBatchScheduler / PriorityQueue behaviour; the test
names say which rule they pin.
"""

from __future__ import annotations

import numpy as np
import pytest

from tritium.core import InferRequest, InputTensor
from tritium.core.errors import Unavailable
from tritium.scheduling.batch_config import BatchingConfig, QueuePolicy, TimeoutAction
from tritium.scheduling.batch_policy import BatchPolicy

US = 1000  # ns


def _req(
    i: int,
    rows: int = 1,
    *,
    priority: int = 0,
    timeout_us: int = 0,
    shapes: dict[str, tuple[int, ...]] | None = None,
) -> InferRequest:
    shapes = shapes or {"IN": (rows, 4)}
    inputs = [InputTensor(n, "FP32", s, np.zeros(0, np.float32)) for n, s in shapes.items()]
    return InferRequest(
        "m", id=str(i), inputs=inputs, priority=priority, timeout_us=timeout_us, batch_size=rows
    )


def _policy(
    max_batch: int = 8, preferred: tuple[int, ...] = (), delay_us: int = 0, **kw
) -> BatchPolicy:
    return BatchPolicy(
        BatchingConfig(
            max_batch_size=max_batch,
            preferred_batch_sizes=preferred,
            max_queue_delay_us=delay_us,
            **kw,
        )
    )


def _ids(batch) -> list[str]:
    return [e.request.id for e in batch]


# -- preferred sizes and the queue delay -----------------------------------------------


def test_largest_formable_preferred_size_goes_at_once():
    policy = _policy(preferred=(2, 4), delay_us=1000)
    for i in range(5):
        policy.enqueue(_req(i), 0)
    decision = policy.poll(0, True)
    assert _ids(decision.batch) == ["0", "1", "2", "3"]
    # The fifth cannot reach a preferred size: it waits out the delay from its arrival.
    decision = policy.poll(0, True)
    assert decision.batch is None and decision.wake_at_ns == 1000 * US


def test_smaller_preferred_size_goes_when_the_larger_is_out_of_reach():
    # Triton sends the largest preferred size formable from what is queued now; with 3
    # queued and preferred [2, 4] that is 2, without waiting for a 4th.
    policy = _policy(preferred=(2, 4), delay_us=1000)
    for i in range(3):
        policy.enqueue(_req(i), 0)
    assert _ids(policy.poll(0, True).batch) == ["0", "1"]


def test_waits_when_no_preferred_size_is_reached_then_sends_on_arrival():
    policy = _policy(preferred=(4,), delay_us=1000)
    for i in range(3):
        policy.enqueue(_req(i), i * US)
        decision = policy.poll(i * US, True)
        assert decision.batch is None and decision.wake_at_ns == 1000 * US
    policy.enqueue(_req(3), 10 * US)
    assert _ids(policy.poll(10 * US, True).batch) == ["0", "1", "2", "3"]


def test_delay_is_measured_from_the_oldest_request_in_the_batch():
    policy = _policy(preferred=(8,), delay_us=1000)
    policy.enqueue(_req(0), 0)
    policy.enqueue(_req(1), 300 * US)
    assert policy.poll(999 * US, True).wake_at_ns == 1000 * US
    assert policy.poll(999 * US, True).batch is None
    assert _ids(policy.poll(1000 * US, True).batch) == ["0", "1"]
    # The next batch's clock starts at its own oldest request.
    policy.enqueue(_req(2), 1500 * US)
    assert policy.poll(1500 * US, True).wake_at_ns == 2500 * US


def test_after_the_delay_everything_pending_goes_even_past_the_preferred_size():
    # Triton: once the delay is exceeded the whole pending batch (up to max) is sent.
    policy = _policy(preferred=(4,), delay_us=100)
    for i in range(6):
        policy.enqueue(_req(i), 0)
    assert _ids(policy.poll(100 * US, True).batch) == [str(i) for i in range(6)]


def test_no_delay_sends_what_is_there_at_once():  # dynamic_batching {}
    policy = BatchPolicy(BatchingConfig.from_config({"max_batch_size": 8, "dynamic_batching": {}}))
    for i in range(3):
        policy.enqueue(_req(i), 0)
    decision = policy.poll(0, True)
    assert _ids(decision.batch) == ["0", "1", "2"] and decision.wake_at_ns is None


def test_no_delay_batches_never_exceed_max_batch_size():
    policy = _policy(max_batch=8)
    for i in range(10):
        policy.enqueue(_req(i), 0)
    assert len(policy.poll(0, True).batch) == 8
    assert _ids(policy.poll(0, True).batch) == ["8", "9"]
    assert policy.poll(0, True).batch is None


def test_nothing_is_formed_without_a_free_runner():
    policy = _policy(delay_us=0)
    for i in range(3):
        policy.enqueue(_req(i), 0)
    decision = policy.poll(0, False)
    assert decision.batch is None and decision.wake_at_ns is None
    assert len(policy.poll(0, True).batch) == 3  # they accumulated into one batch


def test_empty_queue_polls_idle():
    decision = _policy(delay_us=100).poll(0, True)
    assert decision.batch is None and decision.rejected == () and decision.wake_at_ns is None


# -- rows and shapes ---------------------------------------------------------------------


def test_rows_are_counted_along_the_batch_dimension_never_above_max():
    policy = _policy(max_batch=8, delay_us=1000)
    for i in range(3):
        policy.enqueue(_req(i, rows=3), 0)
    # 3+3 = 6; the third would make 9 > 8, so the batch cannot grow: it goes now.
    batch = policy.poll(0, True).batch
    assert _ids(batch) == ["0", "1"] and sum(e.rows for e in batch) == 6
    decision = policy.poll(0, True)
    assert decision.batch is None and decision.wake_at_ns == 1000 * US
    assert policy.statistics().queued_rows == 3


def test_batch_that_would_overshoot_the_largest_preferred_size_goes_at_once():
    # Triton marks the pending batch as the best it can get when the next request
    # would pass the largest preferred size.
    policy = _policy(max_batch=8, preferred=(4,), delay_us=1000)
    policy.enqueue(_req(0), 0)
    policy.enqueue(_req(1), 0)
    policy.enqueue(_req(2, rows=3), 0)
    assert _ids(policy.poll(0, True).batch) == ["0", "1"]


def test_single_request_larger_than_the_preferred_sizes_goes_alone_at_once():
    policy = _policy(max_batch=8, preferred=(2,), delay_us=1000)
    policy.enqueue(_req(0, rows=5), 0)
    assert _ids(policy.poll(0, True).batch) == ["0"]


def test_non_ragged_inputs_must_match_and_a_mismatch_is_never_overtaken():
    policy = _policy(delay_us=1000, equal_shape_inputs=frozenset({"IN"}))
    for i, width in enumerate((3, 3, 5, 3)):
        policy.enqueue(_req(i, shapes={"IN": (1, width)}), 0)
    assert _ids(policy.poll(0, True).batch) == ["0", "1"]
    assert _ids(policy.poll(0, True).batch) == ["2"]  # "3" is not pulled ahead of it
    decision = policy.poll(0, True)
    assert decision.batch is None and decision.wake_at_ns == 1000 * US


def test_batch_dimension_itself_may_differ_between_requests():
    policy = _policy(equal_shape_inputs=frozenset({"IN"}))
    policy.enqueue(_req(0, rows=1, shapes={"IN": (1, 3)}), 0)
    policy.enqueue(_req(1, rows=2, shapes={"IN": (2, 3)}), 0)
    assert _ids(policy.poll(0, True).batch) == ["0", "1"]


def test_ragged_inputs_batch_whatever_their_shapes():
    config = BatchingConfig.from_config(
        {
            "max_batch_size": 8,
            "input": [{"name": "IN", "dims": [-1], "allow_ragged_batch": True}],
            "dynamic_batching": {},
        }
    )
    assert config.equal_shape_inputs == frozenset()
    policy = BatchPolicy(config)
    for i, width in enumerate((3, 5, 7)):
        policy.enqueue(_req(i, shapes={"IN": (1, width)}), 0)
    assert _ids(policy.poll(0, True).batch) == ["0", "1", "2"]


def test_optional_inputs_batch_only_with_the_same_input_names():
    policy = _policy(has_optional_inputs=True)
    policy.enqueue(_req(0, shapes={"A": (1, 2)}), 0)
    policy.enqueue(_req(1, shapes={"A": (1, 2)}), 0)
    policy.enqueue(_req(2, shapes={"A": (1, 2), "B": (1, 2)}), 0)
    policy.enqueue(_req(3, shapes={"B": (1, 2)}), 0)
    assert _ids(policy.poll(0, True).batch) == ["0", "1"]
    assert _ids(policy.poll(0, True).batch) == ["2"]
    assert _ids(policy.poll(0, True).batch) == ["3"]


# -- priorities --------------------------------------------------------------------------


def _levels(**kw) -> BatchPolicy:
    return _policy(priority_levels=3, default_priority_level=2, **kw)


def test_higher_priority_levels_go_first_fifo_within_a_level():
    policy = _levels()
    policy.enqueue(_req(0, priority=3), 0)
    policy.enqueue(_req(1, priority=2), 0)
    policy.enqueue(_req(2, priority=1), 0)
    policy.enqueue(_req(3, priority=1), 0)
    policy.enqueue(_req(4, priority=3), 0)
    assert _ids(policy.poll(0, True).batch) == ["2", "3", "1", "0", "4"]


def test_priority_zero_and_out_of_range_use_the_default_level():
    # Triton's InferenceRequest::SetPriority maps both to the default level.
    policy = _levels()
    policy.enqueue(_req(0, priority=3), 0)
    policy.enqueue(_req(1, priority=0), 0)
    policy.enqueue(_req(2, priority=99), 0)
    assert policy.statistics().queued_by_level == (0, 2, 1)
    assert _ids(policy.poll(0, True).batch) == ["1", "2", "0"]


def test_priority_is_ignored_without_priority_levels():
    policy = _policy()
    policy.enqueue(_req(0, priority=5), 0)
    policy.enqueue(_req(1, priority=1), 0)
    assert _ids(policy.poll(0, True).batch) == ["0", "1"]


def test_higher_priority_arrival_joins_the_front_of_a_waiting_batch():
    policy = _levels(max_batch=2, delay_us=1000)
    policy.enqueue(_req(0, priority=3), 0)
    assert policy.poll(0, True).batch is None
    policy.enqueue(_req(1, priority=3), 10 * US)
    policy.enqueue(_req(2, priority=1), 20 * US)
    assert _ids(policy.poll(20 * US, True).batch) == ["2", "0"]


# -- queue policies ----------------------------------------------------------------------


def _timed(
    action: TimeoutAction, timeout_us: int = 100, override: bool = False, **kw
) -> BatchPolicy:
    return _policy(
        default_queue_policy=QueuePolicy(action, timeout_us, override),
        **kw,
    )


def test_expired_request_with_reject_fails_with_timeout():
    policy = _timed(TimeoutAction.REJECT, delay_us=1000)
    policy.enqueue(_req(0), 0)
    policy.enqueue(_req(1), 50 * US)
    # Waiting: wake for the first timeout, before the queue delay.
    assert policy.poll(60 * US, True).wake_at_ns == 100 * US
    decision = policy.poll(100 * US, True)
    assert _ids(decision.rejected) == ["0"]
    assert decision.batch is None and decision.wake_at_ns == 150 * US
    decision = policy.poll(150 * US, True)
    assert _ids(decision.rejected) == ["1"] and decision.batch is None
    assert policy.statistics().timed_out == 2 and policy.statistics().queued == 0


def test_expired_request_with_delay_moves_behind_unexpired_ones():
    policy = _timed(TimeoutAction.DELAY)
    policy.enqueue(_req(0), 0)  # expires at 100us
    policy.enqueue(_req(1), 200 * US)  # expires at 300us
    assert policy.poll(250 * US, False).batch is None  # busy runners: nothing examined
    decision = policy.poll(250 * US, True)
    assert _ids(decision.batch) == ["1", "0"] and decision.rejected == ()


def test_delayed_request_is_served_after_unexpired_ones_of_its_level():
    policy = _timed(TimeoutAction.DELAY, max_batch=1)
    policy.enqueue(_req(0), 0)
    policy.enqueue(_req(1), 200 * US)
    assert _ids(policy.poll(250 * US, True).batch) == ["1"]
    assert policy.statistics().delayed == 1
    policy.enqueue(_req(2), 260 * US)
    assert _ids(policy.poll(260 * US, True).batch) == ["2"]
    assert _ids(policy.poll(260 * US, True).batch) == ["0"]
    assert policy.statistics().delayed == 0


def test_timeout_override_can_only_shorten_the_default():
    policy = _timed(TimeoutAction.REJECT, timeout_us=100, override=True)
    shorter = policy.enqueue(_req(0, timeout_us=40), 0)
    longer = policy.enqueue(_req(1, timeout_us=500), 0)
    assert shorter.deadline_ns == 40 * US
    assert longer.deadline_ns == 100 * US


def test_timeout_override_is_ignored_when_not_allowed():
    policy = _timed(TimeoutAction.REJECT, timeout_us=100, override=False)
    assert policy.enqueue(_req(0, timeout_us=40), 0).deadline_ns == 100 * US


def test_timeout_override_cannot_add_a_timeout_to_an_untimed_queue():
    # PolicyQueue::Enqueue compares against the default of 0, so nothing is shorter.
    policy = _timed(TimeoutAction.REJECT, timeout_us=0, override=True)
    assert policy.enqueue(_req(0, timeout_us=40), 0).deadline_ns == 0


def test_per_level_queue_policy_applies_to_its_level():
    policy = _levels(
        priority_queue_policies={1: QueuePolicy(TimeoutAction.REJECT, 10, False, 1)},
    )
    assert policy.enqueue(_req(0, priority=1), 0).deadline_ns == 10 * US
    assert policy.enqueue(_req(1, priority=2), 0).deadline_ns == 0
    with pytest.raises(Unavailable, match="^Exceeds maximum queue size$"):
        policy.enqueue(_req(2, priority=1), 0)
    policy.enqueue(_req(3, priority=2), 0)  # the other level has room


def test_full_queue_rejects_and_frees_up_after_dispatch():
    policy = _policy(default_queue_policy=QueuePolicy(max_queue_size=2))
    policy.enqueue(_req(0), 0)
    policy.enqueue(_req(1), 0)
    with pytest.raises(Unavailable, match="Exceeds maximum queue size"):
        policy.enqueue(_req(2), 0)
    assert policy.statistics().rejected_full == 1
    policy.poll(0, True)
    policy.enqueue(_req(3), 0)


def test_unbounded_queue_still_has_a_hard_cap():
    policy = _policy(queue_cap=3)
    for i in range(3):
        policy.enqueue(_req(i), 0)
    with pytest.raises(Unavailable, match="Exceeds maximum queue size"):
        policy.enqueue(_req(3), 0)


# -- discard and drain -------------------------------------------------------------------


def test_discarded_request_leaves_the_pending_batch():
    policy = _policy(preferred=(4,), delay_us=1000)
    entries = [policy.enqueue(_req(i), 0) for i in range(3)]
    assert policy.poll(0, True).batch is None
    assert policy.discard(entries[1]) is True
    assert policy.discard(entries[1]) is False
    policy.enqueue(_req(3), 0)
    policy.enqueue(_req(4), 0)
    assert _ids(policy.poll(0, True).batch) == ["0", "2", "3", "4"]
    assert policy.discard(entries[0]) is False  # already dispatched
    assert policy.statistics().queued == 0


def test_cancelled_requests_do_not_pile_up_behind_a_waiting_one():
    policy = _policy(delay_us=1000)
    policy.enqueue(_req(0), 0)  # stays queued at the head throughout
    for i in range(1, 2001):
        policy.discard(policy.enqueue(_req(i), 0))
    policy.enqueue(_req(9999), 0)
    assert len(policy._levels[0].main) < 200  # rebuilt, not 2002 entries long
    assert policy.statistics().queued == 2
    assert _ids(policy.poll(1000 * US, True).batch) == ["0", "9999"]


def test_drain_returns_every_queued_request_once():
    policy = _timed(TimeoutAction.DELAY, max_batch=1)
    policy.enqueue(_req(0), 0)
    policy.enqueue(_req(1), 200 * US)
    policy.enqueue(_req(2), 200 * US)
    assert _ids(policy.poll(250 * US, True).batch) == ["1"]  # "0" is now delayed
    assert sorted(_ids(policy.drain())) == ["0", "2"]
    stats = policy.statistics()
    assert (stats.queued, stats.queued_rows, stats.delayed) == (0, 0, 0)
    assert policy.poll(300 * US, True).batch is None


# -- configuration -----------------------------------------------------------------------


def test_from_config_reads_tritons_json_document():
    from tritium.config import complete_config, config_to_json, parse_config_text

    text = """
    name: "m" backend: "python" max_batch_size: 16
    input [ { name: "A" data_type: TYPE_FP32 dims: [ -1 ] },
            { name: "B" data_type: TYPE_FP32 dims: [ -1 ] allow_ragged_batch: true },
            { name: "C" data_type: TYPE_FP32 dims: [ 4 ] optional: true } ]
    output [ { name: "O" data_type: TYPE_FP32 dims: [ -1 ] } ]
    dynamic_batching {
      preferred_batch_size: [ 8, 4 ] max_queue_delay_microseconds: 250
      priority_levels: 2 default_priority_level: 2
      default_queue_policy { timeout_action: DELAY default_timeout_microseconds: 70
                             allow_timeout_override: true max_queue_size: 5 }
      priority_queue_policy { key: 1 value { max_queue_size: 3 } }
    }
    """
    doc = config_to_json(complete_config(parse_config_text(text, "m"), "m", gpu_count=0))
    config = BatchingConfig.from_config(doc)
    assert config.max_batch_size == 16
    assert config.preferred_batch_sizes == (4, 8)
    assert config.max_queue_delay_us == 250
    assert (config.priority_levels, config.default_priority_level) == (2, 2)
    assert config.default_queue_policy == QueuePolicy(TimeoutAction.DELAY, 70, True, 5)
    assert config.priority_queue_policies == {1: QueuePolicy(TimeoutAction.REJECT, 0, False, 3)}
    assert config.equal_shape_inputs == frozenset({"A"})
    assert config.has_optional_inputs is True


def test_from_config_accepts_64_bit_integers_as_strings():
    config = BatchingConfig.from_config(
        {
            "max_batch_size": "4",
            "input": [{"name": "A", "dims": ["-1", "3"]}],
            "dynamic_batching": {
                "preferred_batch_size": ["2"],
                "max_queue_delay_microseconds": "100",
                "priority_levels": "2",
                "default_priority_level": "1",
                "default_queue_policy": {"default_timeout_microseconds": "9"},
                "priority_queue_policy": {"2": {"timeout_action": 1, "max_queue_size": "7"}},
            },
        }
    )
    assert config.max_batch_size == 4 and config.preferred_batch_sizes == (2,)
    assert config.max_queue_delay_us == 100 and config.priority_levels == 2
    assert config.default_queue_policy.default_timeout_us == 9
    assert config.priority_queue_policies == {2: QueuePolicy(TimeoutAction.DELAY, 0, False, 7)}
    assert config.equal_shape_inputs == frozenset({"A"})


def test_from_config_without_dynamic_batching_reads_as_the_empty_block():
    config = BatchingConfig.from_config({"max_batch_size": 4})
    assert config == BatchingConfig(max_batch_size=4)


def test_empty_preferred_sizes_mean_max_batch_size():
    policy = _policy(max_batch=4, delay_us=1000)
    for i in range(5):
        policy.enqueue(_req(i), 0)
    assert len(policy.poll(0, True).batch) == 4


def test_invalid_default_priority_level_is_refused():
    with pytest.raises(ValueError):
        _policy(priority_levels=2, default_priority_level=3)
