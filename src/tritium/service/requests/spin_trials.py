"""Whether polling the loop with several requests in flight pays: measured, not guessed.

Polling instead of sleeping between batches takes a wake-up off the path from a worker's
reply to its next batch, which is worth a lot on a machine with idle cores (a model whose
own compute keeps its batches apart) and costs throughput on a full one (the CPU it burns
is taken from the workers and the clients). Which of the two a machine is changes with the
load and with whatever else runs there, and nothing cheap to read tells them apart, so the
answer is measured where it shows: in the requests answered.

Every :data:`CHOSEN_NS` the spinner runs a trial of four :data:`TRIAL_NS` periods, without
polling, with, with, without (so a load that rises or falls during the trial favours
neither), counts the requests answered in the second half of each (the first lets the
change settle), and polls until the next trial only if the periods with polling answered
at least :data:`GAIN` times as many per second. A machine where polling hurts pays for it
during two trial periods in each round (a twelfth of the time, at the few per cent it
costs); one where it helps loses it as long.
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
# Without, with, with, without.
_ORDER = (False, True, True, False)


class SpinTrials:
    """Decides, round after round, whether the loop polls with several requests in flight
    (:attr:`on`); told of every answer (:meth:`answered`) and of the time (:meth:`tick`)."""

    __slots__ = (
        "on",
        "_step",
        "_period_end",
        "_period_start",
        "_settle_at",
        "_answered",
        "_counts",
        "_spans",
    )

    def __init__(self) -> None:
        self.on = False
        self._step = -1  # the trial period under way (-1: polling as chosen, no trial)
        self._period_start = 0
        self._period_end = 0  # the first tick starts a trial
        self._settle_at = 0  # when the current trial period starts counting (0: counting)
        self._answered = 0  # answers in the current period
        self._counts = [0, 0]  # answers in the trial's periods without / with polling
        self._spans = [0, 0]  # and their lengths (ns)

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
        if step >= 0:
            mode = _ORDER[step]
            self._counts[mode] += self._answered
            self._spans[mode] += now - self._period_start
            step += 1
        else:
            step = 0
            self._counts = [0, 0]
            self._spans = [0, 0]
        if step < len(_ORDER):
            self._step = step
            self.on = _ORDER[step]
            self._period_end = now + TRIAL_NS
            self._settle_at = now + int(TRIAL_NS * SETTLE)
        else:
            self._step = -1
            self.on = self._pays()
            self._period_end = now + CHOSEN_NS
            self._settle_at = 0
        self._period_start = now
        self._answered = 0

    def _pays(self) -> bool:
        (without, with_), (span_without, span_with) = self._counts, self._spans
        if not (span_without and span_with and with_):
            return False
        return with_ * span_without >= GAIN * without * span_with
