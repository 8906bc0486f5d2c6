"""``pb_utils.MetricFamily`` / ``Metric``: Triton's custom-metrics API inside a worker.

Counters, gauges and histograms follow Triton's rules (a counter only grows, a histogram
needs buckets and only observes; names and label names are Prometheus names) and
``value()`` reads back what this instance recorded. What changed is collected as *updates*
(counter and histogram deltas, the gauge's last value) and sent to the server with the
instance's next reply (see ``notices``), where every instance's updates are merged into
the families shown on ``/metrics``. Deltas, not totals, so two instances incrementing the
same series add up, and a restarted instance does not reset what was counted.
"""

from __future__ import annotations

import bisect
import enum
import re
import threading
from typing import Any

from tritium.backends.python.pb_utils_errors import TritonModelException

_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
_LABEL = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")
# Labels the server writes itself on histogram and summary samples.
_RESERVED_LABELS = frozenset({"le", "quantile"})


class MetricKind(enum.IntEnum):
    COUNTER = 0
    GAUGE = 1
    HISTOGRAM = 2


_KIND_NAMES = {
    MetricKind.COUNTER: "counter",
    MetricKind.GAUGE: "gauge",
    MetricKind.HISTOGRAM: "histogram",
}


class _Pending:
    """Series changed since the last ``take_updates`` (shared by every family here)."""

    lock = threading.Lock()
    changed: dict[int, Metric] = {}


class Metric:
    """One labelled series of a family; made by ``MetricFamily.Metric(labels, buckets)``."""

    __slots__ = (
        "_family",
        "_kind",
        "_labels",
        "_buckets",
        "_value",
        "_counts",
        "_sum",
        "_delta",
        "_delta_counts",
        "_delta_sum",
    )

    def __init__(
        self,
        family: MetricFamily,
        kind: MetricKind,
        labels: tuple[tuple[str, str], ...],
        buckets: list[float] | None,
    ) -> None:
        self._family = family
        self._kind = kind
        self._labels = labels
        self._buckets = list(buckets) if buckets is not None else None
        self._value = 0.0
        self._counts = [0] * (len(self._buckets) + 1) if self._buckets is not None else []
        self._sum = 0.0
        self._delta = 0.0
        self._delta_counts = list(self._counts)
        self._delta_sum = 0.0
        with _Pending.lock:  # a new series shows on /metrics at once, at zero
            _Pending.changed[id(self)] = self

    def increment(self, value: float) -> None:
        if self._kind == MetricKind.HISTOGRAM:
            raise TritonModelException(
                "Failed to increment metric value: histogram metrics only support observe()"
            )
        if self._kind == MetricKind.COUNTER and value < 0:
            raise TritonModelException("Failed to increment metric value: counters cannot decrease")
        with _Pending.lock:
            self._value += value
            self._delta += value
            _Pending.changed[id(self)] = self

    def set(self, value: float) -> None:
        if self._kind != MetricKind.GAUGE:
            raise TritonModelException("Failed to set metric value: only gauge metrics can be set")
        with _Pending.lock:
            self._value = float(value)
            _Pending.changed[id(self)] = self

    def observe(self, value: float) -> None:
        if self._kind != MetricKind.HISTOGRAM or self._buckets is None:
            raise TritonModelException(
                "Failed to observe metric value: only histogram metrics can observe"
            )
        index = bisect.bisect_left(self._buckets, value)
        with _Pending.lock:
            self._counts[index] += 1
            self._sum += value
            self._delta_counts[index] += 1
            self._delta_sum += value
            _Pending.changed[id(self)] = self

    def value(self) -> float:
        if self._kind == MetricKind.HISTOGRAM:
            raise TritonModelException(
                "Failed to get metric value: histogram metrics have no single value"
            )
        return self._value

    def _take_update(self) -> dict[str, Any]:
        """This series' change since the last update (called with the lock held)."""
        family = self._family
        update: dict[str, Any] = {
            "name": family._name,
            "help": family._description,
            "kind": _KIND_NAMES[self._kind],
            "labels": self._labels,
        }
        if self._kind == MetricKind.COUNTER:
            update["inc"] = self._delta
            self._delta = 0.0
        elif self._kind == MetricKind.GAUGE:
            update["set"] = self._value
        else:
            update["buckets"] = self._buckets
            update["counts"] = self._delta_counts
            update["sum"] = self._delta_sum
            self._delta_counts = [0] * len(self._delta_counts)
            self._delta_sum = 0.0
        return update


class MetricFamily:
    """``MetricFamily(name, description, kind)`` with ``COUNTER``/``GAUGE``/``HISTOGRAM``."""

    COUNTER = MetricKind.COUNTER
    GAUGE = MetricKind.GAUGE
    HISTOGRAM = MetricKind.HISTOGRAM

    def __init__(self, name: str, description: str, kind: MetricKind | int) -> None:
        if not isinstance(name, str) or not _NAME.fullmatch(name):
            raise TritonModelException(
                f"Invalid metric name {name!r}: a metric name must match [a-zA-Z_:][a-zA-Z0-9_:]*"
            )
        if not isinstance(description, str):
            raise TritonModelException("MetricFamily description must be a string")
        try:
            self._kind = MetricKind(kind)
        except ValueError:
            raise TritonModelException(
                f"Invalid metric kind {kind!r}: use MetricFamily.COUNTER, GAUGE or HISTOGRAM"
            ) from None
        self._name = name
        self._description = description
        self._metrics: dict[tuple[tuple[str, str], ...], Metric] = {}

    def Metric(  # noqa: N802 - Triton's method name
        self, labels: dict[str, str] | None = None, buckets: list[float] | None = None
    ) -> Metric:
        labels = labels or {}
        if not isinstance(labels, dict):
            raise TritonModelException("Metric labels must be a dict of str to str")
        for key, value in labels.items():
            if not isinstance(key, str) or not _LABEL.fullmatch(key) or key.startswith("__"):
                raise TritonModelException(
                    f"Invalid label name {key!r}: a label name must match "
                    "[a-zA-Z_][a-zA-Z0-9_]* and not start with '__'"
                )
            if key in _RESERVED_LABELS and self._kind == MetricKind.HISTOGRAM:
                raise TritonModelException(f"Label name {key!r} is reserved for histograms")
            if not isinstance(value, str):
                raise TritonModelException(f"Label {key!r} must have a str value, got {value!r}")
        if self._kind == MetricKind.HISTOGRAM:
            if buckets is None:
                raise TritonModelException("Missing required buckets for histogram metrics")
            buckets = [float(b) for b in buckets]
            if any(b >= c for b, c in zip(buckets, buckets[1:])):
                raise TritonModelException("Histogram buckets must be in increasing order")
        elif buckets is not None:
            raise TritonModelException("Unexpected buckets for a non-histogram metric")
        series = tuple(sorted(labels.items()))
        metric = self._metrics.get(series)
        if metric is None:
            metric = Metric(self, self._kind, series, buckets)
            self._metrics[series] = metric
        return metric


def take_updates() -> list[dict[str, Any]] | None:
    """Every series changed since the last call, as updates for the server; None if none."""
    if not _Pending.changed:
        return None
    with _Pending.lock:
        changed = list(_Pending.changed.values())
        _Pending.changed.clear()
        return [metric._take_update() for metric in changed]
