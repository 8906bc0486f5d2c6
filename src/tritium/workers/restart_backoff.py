"""When a crashed instance is started again: a growing back-off that never gives up.

As Kubernetes' CrashLoopBackOff does: the first restart after a crash happens at once,
each further failure (a crash or a restart that failed) doubles the wait, up to
``max_s``; once an instance has run ``reset_after_s`` without failing, its next crash
counts as a first one again. A pure object: the caller passes ``now`` (monotonic
seconds), so tests drive it with a fake clock and never sleep.
"""

from __future__ import annotations

from dataclasses import dataclass

DEFAULT_FIRST_DELAY_S = 1.0
DEFAULT_MAX_DELAY_S = 30.0
DEFAULT_RESET_AFTER_S = 60.0


@dataclass(frozen=True, slots=True)
class BackoffPolicy:
    """Waits 0, ``first_s``, 2·``first_s``, 4·``first_s``, … up to ``max_s``."""

    first_s: float = DEFAULT_FIRST_DELAY_S
    max_s: float = DEFAULT_MAX_DELAY_S
    #: Running this long without failing resets the back-off.
    reset_after_s: float = DEFAULT_RESET_AFTER_S

    def delay(self, failures: int) -> float:
        """The wait before the next attempt after ``failures`` failures in a row (≥ 1)."""
        if failures <= 1:
            return 0.0
        # 2 ** 62 is far past any cap; the exponent is bounded so huge counts stay cheap.
        return min(self.max_s, self.first_s * 2.0 ** min(failures - 2, 62))


class RestartBackoff:
    """One instance's failures in a row and when it may be started next."""

    def __init__(self, policy: BackoffPolicy = BackoffPolicy()) -> None:
        self.policy = policy
        self.failures = 0  # failures since the instance last ran long enough
        self._running_since: float | None = None
        self.next_attempt: float | None = None  # monotonic time of the next start, if waiting

    def started(self, now: float) -> None:
        """A process is running again (from ``now``)."""
        self._running_since = now
        self.next_attempt = None

    def failed(self, now: float) -> float:
        """A crash or a failed start at ``now``; returns when to try again (monotonic s)."""
        since = self._running_since
        if since is not None and now - since >= self.policy.reset_after_s:
            self.failures = 0  # it ran a good while: this crash is a first one
        self._running_since = None
        self.failures += 1
        self.next_attempt = now + self.policy.delay(self.failures)
        return self.next_attempt
