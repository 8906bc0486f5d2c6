"""Latency summaries over a sliding time window (``--metrics-config summary_latencies``).

Triton's summaries report quantiles of the last ``max_age`` seconds (60 s, in five age
buckets) plus an exact count and sum over all time. Here each age bucket keeps at most
``capacity`` observations (a uniform reservoir sample once full), so memory stays bounded
at any request rate and quantiles are exact until a bucket overflows.

``SummarizedStatistics`` is the statistics object a model gets when summaries are on: it
counts exactly as ``ModelStatistics`` and also observes each request's latencies. Models
without summaries keep the plain class, so the request path costs nothing extra there.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Sequence

from tritium.core.statistics import ModelStatistics

# Triton's default quantiles (quantile, allowed error).
DEFAULT_QUANTILES: tuple[tuple[float, float], ...] = (
    (0.5, 0.05),
    (0.9, 0.01),
    (0.95, 0.001),
    (0.99, 0.001),
    (0.999, 0.0001),
)
MAX_AGE_NS = 60 * 1_000_000_000
AGE_BUCKETS = 5
CAPACITY = 4096


class _Bucket:
    __slots__ = ("values", "seen")

    def __init__(self) -> None:
        self.values: list[float] = []
        self.seen = 0


class LatencySummary:
    """Count, sum and sliding-window quantiles of one latency, observed in ns and
    reported in µs. The sum is kept in ns, so it equals the matching ``*_duration_us``
    counter exactly (both are the ns total divided once)."""

    def __init__(
        self,
        clock: Callable[[], int],
        max_age_ns: int = MAX_AGE_NS,
        age_buckets: int = AGE_BUCKETS,
        capacity: int = CAPACITY,
        rng: random.Random | None = None,
    ) -> None:
        self.count = 0
        self.sum_ns = 0
        self._clock = clock
        self._width = max(1, max_age_ns // age_buckets)
        self._buckets = [_Bucket() for _ in range(age_buckets)]
        self._capacity = capacity
        self._rng = rng or random.Random()
        # Index of the newest bucket and the time its window ends.
        self._head = 0
        self._head_end = clock() + self._width

    @property
    def sum(self) -> int:
        """Microseconds observed in all (not only in the window)."""
        return self.sum_ns // 1000

    def observe(self, ns: int) -> None:
        us = ns // 1000
        self.count += 1
        self.sum_ns += ns
        self._rotate(self._clock())
        bucket = self._buckets[self._head]
        bucket.seen += 1
        if len(bucket.values) < self._capacity:
            bucket.values.append(us)
        else:
            slot = self._rng.randrange(bucket.seen)
            if slot < self._capacity:
                bucket.values[slot] = us

    def _rotate(self, now: int) -> None:
        if now < self._head_end:
            return
        steps = min(len(self._buckets), (now - self._head_end) // self._width + 1)
        for _ in range(steps):
            self._head = (self._head + 1) % len(self._buckets)
            self._buckets[self._head] = _Bucket()
        self._head_end += ((now - self._head_end) // self._width + 1) * self._width

    def quantiles(self, qs: Sequence[float]) -> list[float]:
        """Each quantile of the window's observations (NaN when the window is empty)."""
        self._rotate(self._clock())
        values = sorted(v for b in self._buckets for v in b.values)
        if not values:
            return [math.nan] * len(qs)
        last = len(values) - 1
        return [float(values[min(last, max(0, math.ceil(q * len(values)) - 1))]) for q in qs]


class SummarizedStatistics(ModelStatistics):
    """``ModelStatistics`` that also feeds the five per-request latency summaries."""

    def __init__(self, clock: Callable[[], int]) -> None:
        super().__init__()
        self.request_summary = LatencySummary(clock)
        self.queue_summary = LatencySummary(clock)
        self.compute_input_summary = LatencySummary(clock)
        self.compute_infer_summary = LatencySummary(clock)
        self.compute_output_summary = LatencySummary(clock)

    def record_request(self, ok: bool, total_ns: int, queue_ns: int) -> None:
        super().record_request(ok, total_ns, queue_ns)
        if ok:  # Triton summarises successful requests only, like the counters
            self.request_summary.observe(total_ns)
            self.queue_summary.observe(queue_ns)

    def record_execution(
        self, rows: int, requests: int, input_ns: int, infer_ns: int, output_ns: int
    ) -> None:
        super().record_execution(rows, requests, input_ns, infer_ns, output_ns)
        # Every request of the batch is observed with the batch's times, as the counters do.
        for _ in range(requests):
            self.compute_input_summary.observe(input_ns)
            self.compute_infer_summary.observe(infer_ns)
            self.compute_output_summary.observe(output_ns)
