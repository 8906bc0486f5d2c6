"""The trials that decide whether the loop polls with several requests in flight: periods
without, with, with and without polling; polling is chosen only when the periods with it
answered more requests per second, counted after each period settled."""

from __future__ import annotations

from tritium.service.requests import spin_trials
from tritium.service.requests.spin_trials import SpinTrials

PERIOD = spin_trials.TRIAL_NS
STEP = PERIOD // 100


def _run_trial(trials: SpinTrials, start: int, per_step: dict[bool, int]) -> int:
    """Drive one trial from ``start``: every STEP, ``per_step[trials.on]`` answers. Returns
    the time the choice was made."""
    now = start
    trials.tick(now)  # starts the trial
    while trials._step >= 0:  # noqa: SLF001
        for _ in range(per_step[trials.on]):
            trials.answered()
        now += STEP
        trials.tick(now)
    return now


def test_a_trial_runs_without_with_with_without_then_chooses_polling_when_it_pays():
    trials = SpinTrials()
    modes: dict[int, bool] = {}  # trial period -> polling in it
    now = 1_000_000_000
    trials.tick(now)
    while trials._step >= 0:  # noqa: SLF001
        modes[trials._step] = trials.on  # noqa: SLF001
        for _ in range(12 if trials.on else 10):
            trials.answered()
        now += STEP
        trials.tick(now)
    assert modes == {0: False, 1: True, 2: True, 3: False}
    assert trials.on  # 20 % more answers with polling
    # The chosen mode holds until the next trial is due.
    trials.tick(now + spin_trials.CHOSEN_NS - 1)
    assert trials.on and trials._step == -1  # noqa: SLF001
    trials.tick(now + spin_trials.CHOSEN_NS)
    assert not trials.on and trials._step == 0  # noqa: SLF001  # the next trial begins


def test_polling_is_not_chosen_when_it_answers_fewer_or_no_more():
    for with_, without in ((9, 10), (10, 10), (0, 0)):
        trials = SpinTrials()
        _run_trial(trials, 1_000_000_000, {True: with_, False: without})
        assert not trials.on, (with_, without)


def test_a_gain_below_the_threshold_is_not_enough_and_one_above_is():
    trials = SpinTrials()
    _run_trial(trials, 1_000_000_000, {True: 101, False: 100})  # +1 %
    assert not trials.on
    trials = SpinTrials()
    _run_trial(trials, 1_000_000_000, {True: 105, False: 100})  # +5 %
    assert trials.on


def test_answers_before_a_period_settled_do_not_count():
    # A burst right after each change of mode (the previous mode's carry-over) is left out:
    # only the second half of every period is compared.
    trials = SpinTrials()
    now = 1_000_000_000
    trials.tick(now)
    while trials._step >= 0:  # noqa: SLF001
        settling = trials._settle_at != 0  # noqa: SLF001
        if trials.on:
            answers = 10
        else:
            answers = 100 if settling else 12  # without polling: fast only while settling
        for _ in range(answers):
            trials.answered()
        now += STEP
        trials.tick(now)
    assert not trials.on  # settled, the periods without polling answered more
