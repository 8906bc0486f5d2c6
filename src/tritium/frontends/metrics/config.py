"""``--metrics-config <setting>=<value>``: Triton's metric-shape options, parsed once.

Settings (Triton's names): ``counter_latencies`` (default true) publishes the cumulative
``*_duration_us`` counters; ``summary_latencies`` (default false) the ``*_summary_us``
summaries; ``summary_quantiles`` (``q:error,...``) their quantiles;
``histogram_latencies`` (default false) the first-response histogram of decoupled models.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from tritium.core.latency_summary import DEFAULT_QUANTILES

_TRUE = frozenset({"true", "on", "1"})
_FALSE = frozenset({"false", "off", "0"})


@dataclass(frozen=True, slots=True)
class MetricsConfig:
    counter_latencies: bool = True
    summary_latencies: bool = False
    histogram_latencies: bool = False
    summary_quantiles: tuple[tuple[float, float], ...] = DEFAULT_QUANTILES


def parse_metrics_config(entries: Iterable[str]) -> MetricsConfig:
    """Each entry is ``<setting>=<value>``; raises ValueError naming the bad one."""
    values: dict[str, object] = {}
    for entry in entries:
        setting, eq, value = entry.partition("=")
        setting = setting.strip()
        if not eq or not setting or not value:
            raise ValueError(
                f"--metrics-config option format is '<setting>=<value>'. Got {entry}"
            )
        if setting in ("counter_latencies", "summary_latencies", "histogram_latencies"):
            values[setting] = _bool(setting, value)
        elif setting == "summary_quantiles":
            values[setting] = _quantiles(value)
        else:
            known = "counter_latencies, summary_latencies, summary_quantiles, histogram_latencies"
            raise ValueError(f"unknown --metrics-config setting '{setting}' (known: {known})")
    return MetricsConfig(**values)  # type: ignore[arg-type]


def _bool(setting: str, value: str) -> bool:
    lowered = value.lower()
    if lowered in _TRUE:
        return True
    if lowered in _FALSE:
        return False
    raise ValueError(f"--metrics-config {setting} must be true or false, got '{value}'")


def _quantiles(value: str) -> tuple[tuple[float, float], ...]:
    pairs = []
    for part in value.split(","):
        q, colon, err = part.partition(":")
        try:
            pair = (float(q), float(err))
        except ValueError:
            pair = None
        if not colon or pair is None or not (0.0 <= pair[0] <= 1.0 and 0.0 <= pair[1] <= 1.0):
            raise ValueError(
                "--metrics-config summary_quantiles must be '<quantile>:<error>,...' with "
                f"values in [0, 1], got '{value}'"
            )
        pairs.append(pair)
    return tuple(pairs)
