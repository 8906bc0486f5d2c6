"""Whether polling the loop with several requests in flight pays: measured, not guessed.

Polling instead of sleeping between batches takes a wake-up off the path from a worker's
reply to its next batch, which is worth a lot on a machine with idle cores (a model whose
own compute keeps its batches apart) and costs throughput on a full one (the CPU it burns
is taken from the workers and the clients). Which of the two a machine is changes with the
load and with whatever else runs there, and nothing cheap to read tells them apart, so the
answer is measured where it shows: in the requests answered.

A trial is four :data:`TRIAL_NS` periods, without polling, with, with, without (so a load
that rises or falls steadily during it favours neither); the requests answered in the
second half of each are counted (the first lets the change settle). One trial is a noisy
measure on a shared machine (the same load gave -6 % and +41 % in trials a minute apart), so
the counts add up over the trials, each earlier trial's weighing :data:`DECAY` as much at
every new one (the latest weighs as much as all before it), and the choice has a dead band:
the loop starts polling when the periods with polling answered at least :data:`GAIN` times
as many per second, and stops when they answered fewer than ``1 / GAIN`` times as many;
in between, the last choice holds until the next trial, :data:`CHOSEN_NS` later. Load that
starts, or comes back after a pause, runs :data:`WARMUP_NS` as last chosen (at first:
without polling) before a trial, so that clients setting up their connections do not count
as a gain of whatever comes next. A machine where polling hurts pays for it during two
trial periods in a round (a twelfth of the time, at the few per cent it costs); one where
it helps loses it as long.
"""

from __future__ import annotations

TRIAL_NS = 500_000_000
# The share of a trial period left out of its count at its start: the change of mode takes
# a while to show (the scheduler's account of the loop's CPU use carries over; with 100 ms
# periods, half of them left out, a machine where polling cost 10 % still measured it as a
# gain).
SETTLE = 0.5
CHOSEN_NS = 10_000_000_000
GAIN = 1.02
# How much an earlier trial's counts weigh at each new trial.
DECAY = 0.5
WARMUP_NS = 500_000_000
# Without, with, with, without.
_ORDER = (False, True, True, False)
_IDLE = -3  # the step before any load
_WARMUP = -2  # the step of the warm-up before a trial
_CHOSEN = -1  # the step while the choice holds


class SpinTrials:
    """Decides, round after round, whether the loop polls with several requests in flight
    (:attr:`on`); told of every answer (:meth:`answered`) and of the time (:meth:`tick`)
    whenever a request is accepted with others in flight."""

    __slots__ = (
        "on",
        "_step",
        "_period_end",
        "_period_start",
        "_settle_at",
        "_answered",
        "_counts",
        "_spans",
        "_chosen",
    )

    def __init__(self) -> None:
        self.on = False
        self._step = _IDLE  # a trial period (0-3), _WARMUP, _CHOSEN or _IDLE
        self._period_start = 0
        self._period_end = 0
        self._settle_at = 0  # when the current trial period starts counting (0: counting)
        self._answered = 0  # answers in the current period
        # Answers in the trials' periods without / with polling, and the periods' lengths
        # (ns), earlier trials weighing less (DECAY).
        self._counts = [0.0, 0.0]
        self._spans = [0.0, 0.0]
        self._chosen = False  # what the last trial chose

    def answered(self) -> None:
        self._answered += 1

    def tick(self, now: int) -> None:
        """Move on to the next period if the current one is over."""
        if now < self._period_end:
            if self._settle_at and now >= self._settle_at:
                self._settle_at = 0
                self._period_start = now
                self._answered = 0
            return
        step = self._step
        if step == _IDLE or now - self._period_end > WARMUP_NS:
            # The load paused (or is new): whatever was under way says nothing of now.
            self._begin(_WARMUP, self._chosen, now, WARMUP_NS)
            return
        if step == _WARMUP or step == _CHOSEN:
            counts, spans = self._counts, self._spans
            self._counts = [counts[0] * DECAY, counts[1] * DECAY]
            self._spans = [spans[0] * DECAY, spans[1] * DECAY]
            self._begin(0, _ORDER[0], now, TRIAL_NS)
            return
        mode = _ORDER[step]
        self._counts[mode] += self._answered
        self._spans[mode] += now - self._period_start
        if step + 1 < len(_ORDER):
            self._begin(step + 1, _ORDER[step + 1], now, TRIAL_NS)
            return
        self._chosen = self._pays()
        self._begin(_CHOSEN, self._chosen, now, CHOSEN_NS)

    def _begin(self, step: int, on: bool, now: int, length: int) -> None:
        self._step = step
        self.on = on
        self._period_start = now
        self._period_end = now + length
        self._settle_at = now + int(length * SETTLE) if step >= 0 else 0
        self._answered = 0

    def _pays(self) -> bool:
        (without, with_), (span_without, span_with) = self._counts, self._spans
        if not (span_without and span_with and with_):
            return False
        if self._chosen:  # polling: it stops when it answers fewer
            return with_ * span_without * GAIN >= without * span_with
        return with_ * span_without >= GAIN * without * span_with
