"""The trials that decide whether the loop polls with several requests in flight: a warm-up,
then periods without, with, with and without polling; polling starts when it answered more
requests per second (counted after each period settled, earlier trials' counts weighing
half at each new one) and stops when it answered fewer, the choice holding until the next
trial, and a pause in the load starts over with a warm-up that keeps the last choice."""

from __future__ import annotations

from tritium.service.requests import spin_trials
from tritium.service.requests.spin_trials import SpinTrials

PERIOD = spin_trials.TRIAL_NS
STEP = PERIOD // 100
START = 1_000_000_000


def _drive(trials: SpinTrials, now: int, until: int, per_step: dict[bool, int]) -> int:
    """From ``now`` to ``until``: every STEP, ``per_step[trials.on]`` answers and a tick."""
    while now < until:
        for _ in range(per_step[trials.on]):
            trials.answered()
        now += STEP
        trials.tick(now)
    return now


def _trial_length() -> int:
    return 4 * PERIOD + STEP


def _warmed(trials: SpinTrials) -> int:
    """Start ``trials`` and run out its warm-up; returns the time its first trial began."""
    trials.tick(START)  # the warm-up: no polling
    assert not trials.on
    now = START + spin_trials.WARMUP_NS
    trials.tick(now)
    return now


def test_a_trial_runs_without_with_with_without_after_a_warm_up():
    trials = SpinTrials()
    now = _warmed(trials)
    modes: list[bool] = []
    for _ in range(4):
        modes.append(trials.on)
        now = _drive(trials, now, now + PERIOD, {True: 12, False: 10})
    assert modes == [False, True, True, False]


def test_polling_is_chosen_when_it_pays_and_holds_until_the_next_trial():
    trials = SpinTrials()
    now = _warmed(trials)
    gain = {True: 12, False: 10}  # 20 % more answers with polling
    now = _drive(trials, now, now + _trial_length(), gain)
    assert trials.on
    now = _drive(trials, now, now + spin_trials.CHOSEN_NS - 2 * STEP, gain)
    assert trials.on and trials._step == spin_trials._CHOSEN  # noqa: SLF001  # the choice holds
    # The next trial finds no gain: with the first one's counts at half weight, polling
    # still answered more, and it holds.
    now = _drive(trials, now, now + 4 * STEP + _trial_length(), {True: 10, False: 10})
    assert trials.on and trials._step == spin_trials._CHOSEN  # noqa: SLF001


def test_one_noisy_trial_does_not_undo_a_clear_gain_and_a_lasting_loss_does():
    trials = SpinTrials()
    now = _warmed(trials)
    now = _drive(trials, now, now + _trial_length(), {True: 120, False: 100})  # +20 %
    assert trials.on
    # A trial where polling answered 3 % fewer: (60 + 97) / (50 + 100) is still +4.7 %.
    now = _drive(trials, now, now + spin_trials.CHOSEN_NS + _trial_length(), {True: 97, False: 100})
    assert trials.on and trials._step == spin_trials._CHOSEN  # noqa: SLF001
    # Polling answering 10 % fewer trial after trial: (78.5 + 90) / (75 + 100) < 1 / GAIN.
    now = _drive(trials, now, now + spin_trials.CHOSEN_NS + _trial_length(), {True: 90, False: 100})
    assert not trials.on and trials._step == spin_trials._CHOSEN  # noqa: SLF001
    # Off, it needs GAIN to start again: a trial with +1 % leaves it off.
    _drive(trials, now, now + spin_trials.CHOSEN_NS + _trial_length(), {True: 101, False: 100})
    assert not trials.on


def test_polling_is_not_chosen_when_it_answers_fewer_or_no_more_or_too_little_more():
    for with_, without in ((9, 10), (10, 10), (0, 0), (101, 100)):
        trials = SpinTrials()
        now = _warmed(trials)
        _drive(trials, now, now + 3 * _trial_length(), {True: with_, False: without})
        assert not trials.on, (with_, without)
    trials = SpinTrials()
    now = _warmed(trials)
    _drive(trials, now, now + _trial_length(), {True: 105, False: 100})  # +5 %
    assert trials.on


def test_answers_before_a_period_settled_do_not_count():
    # A burst right after each change of mode (the previous mode's carry-over) is left out:
    # only the second half of every period is compared.
    trials = SpinTrials()
    now = _warmed(trials)
    for _ in range(4):  # one trial
        while True:
            answers = 10 if trials.on else (100 if trials._settle_at else 12)  # noqa: SLF001
            for _ in range(answers):
                trials.answered()
            step = trials._step  # noqa: SLF001
            now += STEP
            trials.tick(now)
            if trials._step != step:  # noqa: SLF001
                break
    assert not trials.on  # settled, the periods without polling answered more


def test_a_pause_in_the_load_warms_up_again_as_last_chosen_before_the_next_trial():
    trials = SpinTrials()
    now = _warmed(trials)
    now = _drive(trials, now, now + _trial_length(), {True: 12, False: 10})
    assert trials.on
    now += spin_trials.CHOSEN_NS + 2 * spin_trials.WARMUP_NS  # no requests for a while
    trials.tick(now)
    assert trials.on and trials._step == spin_trials._WARMUP  # noqa: SLF001  # warming up
    trials.tick(now + spin_trials.WARMUP_NS)
    assert not trials.on and trials._step == 0  # noqa: SLF001  # then a trial
