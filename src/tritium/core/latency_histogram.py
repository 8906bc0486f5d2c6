"""The first-response histogram of decoupled models (``--metrics-config
histogram_latencies=true``): Triton's ``nv_inference_first_response_histogram_ms``.

Each decoupled request observes, once, the whole milliseconds from its arrival to its
first response. Buckets are Triton's defaults (100, 500, 2000, 5000 ms) unless the
model's ``model_metrics`` names this family with its own ``histogram_options.buckets``.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterable
from typing import Any

FIRST_RESPONSE_FAMILY = "nv_inference_first_response_histogram_ms"
DEFAULT_BUCKETS_MS: tuple[float, ...] = (100.0, 500.0, 2000.0, 5000.0)


class LatencyHistogram:
    __slots__ = ("buckets", "counts", "sum")

    def __init__(self, buckets: Iterable[float] = DEFAULT_BUCKETS_MS) -> None:
        self.buckets = tuple(sorted(set(float(b) for b in buckets)))
        self.counts = [0] * (len(self.buckets) + 1)  # per bucket, then +Inf (not cumulative)
        self.sum = 0

    def observe(self, value: int) -> None:
        # A value equal to a bound belongs to that bound's bucket (Prometheus' ``le``).
        self.counts[bisect_left(self.buckets, value)] += 1
        self.sum += value


def first_response_buckets(config: dict[str, Any]) -> tuple[float, ...]:
    """The model's buckets for this family (``model_metrics.metric_control``), else
    Triton's defaults."""
    controls = config.get("model_metrics", {}).get("metric_control", [])
    for control in controls:
        if control.get("metric_identifier", {}).get("family") == FIRST_RESPONSE_FAMILY:
            buckets = control.get("histogram_options", {}).get("buckets")
            if buckets:
                return tuple(float(b) for b in buckets)
    return DEFAULT_BUCKETS_MS
