"""``pb_utils.MetricFamily`` / ``Metric``: Triton's custom-metrics API, kept in-process.

Models that create custom metrics load and run unchanged: counters, gauges and histograms
follow Triton's rules (a counter only grows, a histogram needs buckets and only observes)
and ``value()`` reads back what was recorded. The values are not yet exported on the
server's ``/metrics`` endpoint.
"""

from __future__ import annotations

import bisect
import enum
import threading

from tritium.backends.python.pb_utils_errors import TritonModelException


class MetricKind(enum.IntEnum):
    COUNTER = 0
    GAUGE = 1
    HISTOGRAM = 2


class Metric:
    """One labelled series of a family; made by ``MetricFamily.Metric(labels, buckets)``."""

    __slots__ = ("_kind", "_labels", "_buckets", "_value", "_counts", "_sum", "_lock")

    def __init__(
        self, kind: MetricKind, labels: dict[str, str], buckets: list[float] | None
    ) -> None:
        self._kind = kind
        self._labels = dict(labels)
        self._buckets = list(buckets) if buckets is not None else None
        self._value = 0.0
        self._counts = [0] * (len(self._buckets) + 1) if self._buckets is not None else []
        self._sum = 0.0
        self._lock = threading.Lock()

    def increment(self, value: float) -> None:
        if self._kind == MetricKind.HISTOGRAM:
            raise TritonModelException(
                "Failed to increment metric value: histogram metrics only support observe()"
            )
        if self._kind == MetricKind.COUNTER and value < 0:
            raise TritonModelException("Failed to increment metric value: counters cannot decrease")
        with self._lock:
            self._value += value

    def set(self, value: float) -> None:
        if self._kind != MetricKind.GAUGE:
            raise TritonModelException("Failed to set metric value: only gauge metrics can be set")
        with self._lock:
            self._value = float(value)

    def observe(self, value: float) -> None:
        if self._kind != MetricKind.HISTOGRAM or self._buckets is None:
            raise TritonModelException(
                "Failed to observe metric value: only histogram metrics can observe"
            )
        with self._lock:
            self._counts[bisect.bisect_left(self._buckets, value)] += 1
            self._sum += value

    def value(self) -> float:
        if self._kind == MetricKind.HISTOGRAM:
            raise TritonModelException(
                "Failed to get metric value: histogram metrics have no single value"
            )
        return self._value


class MetricFamily:
    """``MetricFamily(name, description, kind)`` with ``COUNTER``/``GAUGE``/``HISTOGRAM``."""

    COUNTER = MetricKind.COUNTER
    GAUGE = MetricKind.GAUGE
    HISTOGRAM = MetricKind.HISTOGRAM

    def __init__(self, name: str, description: str, kind: MetricKind | int) -> None:
        if not isinstance(name, str) or not name:
            raise TritonModelException("MetricFamily name must be a non-empty string")
        self._name = name
        self._description = str(description)
        self._kind = MetricKind(kind)
        self._metrics: dict[tuple[tuple[str, str], ...], Metric] = {}

    def Metric(  # noqa: N802 - Triton's method name
        self, labels: dict[str, str] | None = None, buckets: list[float] | None = None
    ) -> Metric:
        labels = labels or {}
        if self._kind == MetricKind.HISTOGRAM:
            if buckets is None:
                raise TritonModelException("Missing required buckets for histogram metrics")
            if list(buckets) != sorted(buckets):
                raise TritonModelException("Histogram buckets must be in increasing order")
        elif buckets is not None:
            raise TritonModelException("Unexpected buckets for a non-histogram metric")
        key = tuple(sorted((str(k), str(v)) for k, v in labels.items()))
        metric = self._metrics.get(key)
        if metric is None:
            metric = Metric(self._kind, dict(key), buckets)
            self._metrics[key] = metric
        return metric
