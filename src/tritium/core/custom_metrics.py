"""The server's copy of the custom metrics that model code creates (``pb_utils.MetricFamily``).

Workers send updates (counter and histogram deltas, a gauge's last value); this registry
merges them per family and label set, and ``/metrics`` reads it. A family keeps the kind
it was first seen with; an update of another kind for the same name is dropped with one
warning, since one Prometheus name cannot hold two types.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

log = logging.getLogger("tritium.metrics")

Labels = tuple[tuple[str, str], ...]


@dataclass(slots=True)
class Series:
    value: float = 0.0
    buckets: tuple[float, ...] = ()
    counts: list[int] = field(default_factory=list)  # per bucket, then +Inf (not cumulative)
    sum: float = 0.0


@dataclass(slots=True)
class CustomFamily:
    name: str
    help: str
    kind: str  # "counter" | "gauge" | "histogram"
    series: dict[Labels, Series] = field(default_factory=dict)


class CustomMetrics:
    def __init__(self) -> None:
        self.families: dict[str, CustomFamily] = {}
        self._conflicts: set[str] = set()

    def apply(self, updates: list[dict[str, Any]]) -> None:
        """Merge one worker's updates (see ``pb_utils_metrics.take_updates``)."""
        for update in updates:
            try:
                self._apply_one(update)
            except (KeyError, TypeError, ValueError) as exc:
                log.warning("dropped a malformed custom-metric update: %s", exc)

    def _apply_one(self, update: dict[str, Any]) -> None:
        name, kind = str(update["name"]), str(update["kind"])
        family = self.families.get(name)
        if family is None:
            family = self.families[name] = CustomFamily(name, str(update["help"]), kind)
        elif family.kind != kind:
            if name not in self._conflicts:
                self._conflicts.add(name)
                log.warning(
                    "custom metric family %r is a %s; a model used it as a %s",
                    name, family.kind, kind,
                )
            return
        labels: Labels = tuple((str(k), str(v)) for k, v in update["labels"])
        series = family.series.get(labels)
        if kind == "histogram":
            buckets = tuple(float(b) for b in update["buckets"])
            counts = [int(c) for c in update["counts"]]
            if len(counts) != len(buckets) + 1:
                raise ValueError(f"histogram {name!r} sent {len(counts)} counts")
            if series is None:
                series = family.series[labels] = Series(buckets=buckets, counts=[0] * len(counts))
            elif series.buckets != buckets:
                raise ValueError(f"histogram {name!r} changed its buckets")
            for i, count in enumerate(counts):
                series.counts[i] += count
            series.sum += float(update["sum"])
            return
        if series is None:
            series = family.series[labels] = Series()
        if kind == "counter":
            series.value += float(update["inc"])
        else:
            series.value = float(update["set"])


# The server's registry: workers of every model report here (see tritium.workers.notices).
registry = CustomMetrics()
