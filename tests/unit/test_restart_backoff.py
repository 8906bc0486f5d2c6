"""The restart back-off of a crashing instance, driven by a fake clock (plain numbers)."""

from __future__ import annotations

import pytest

from tritium.workers.restart_backoff import BackoffPolicy, RestartBackoff


def test_first_restart_at_once_then_doubling_up_to_the_cap():
    policy = BackoffPolicy(first_s=1.0, max_s=30.0)
    assert [policy.delay(n) for n in range(1, 10)] == [0, 1, 2, 4, 8, 16, 30, 30, 30]


def test_a_huge_failure_count_stays_at_the_cap():
    assert BackoffPolicy(first_s=0.5, max_s=7.0).delay(10_000) == 7.0


def test_crashes_in_a_row_wait_longer_each_time():
    backoff = RestartBackoff(BackoffPolicy(first_s=1.0, max_s=30.0, reset_after_s=60.0))
    now = 100.0
    waits = []
    for _ in range(8):
        at = backoff.failed(now)
        waits.append(at - now)
        now = at
        backoff.started(now)
        now += 5.0  # runs 5 s, then crashes again: not long enough to reset
    assert waits == [0, 1, 2, 4, 8, 16, 30, 30]
    assert backoff.failures == 8


def test_failed_restarts_count_like_crashes():
    backoff = RestartBackoff(BackoffPolicy(first_s=2.0, max_s=30.0))
    assert backoff.failed(0.0) == 0.0  # the crash: restart at once
    assert backoff.failed(0.0) == 2.0  # that restart failed
    assert backoff.failed(2.0) == 6.0  # and the next: 4 s later
    assert backoff.next_attempt == 6.0


def test_running_a_while_without_failing_resets_the_back_off():
    backoff = RestartBackoff(BackoffPolicy(first_s=1.0, max_s=30.0, reset_after_s=60.0))
    for t in (0.0, 1.0, 3.0, 7.0):
        backoff.started(backoff.failed(t))
    assert backoff.failures == 4
    backoff.started(20.0)
    assert backoff.failed(79.9) == 79.9 + 8.0  # 59.9 s of running: not yet
    backoff.started(88.0)
    assert backoff.failed(148.0) == 148.0  # a full minute: the crash counts as a first one
    assert backoff.failures == 1
    assert backoff.next_attempt == 148.0


def test_started_clears_the_next_attempt():
    backoff = RestartBackoff()
    backoff.failed(10.0)
    backoff.failed(10.0)
    assert backoff.next_attempt == 11.0
    backoff.started(11.0)
    assert backoff.next_attempt is None


@pytest.mark.parametrize("failures", [0, 1])
def test_no_wait_before_the_first_restart(failures):
    assert BackoffPolicy().delay(failures) == 0.0
