"""Prometheus metrics with Triton's names, served on ``--metrics-port``.

The server itself lives in ``tritium.frontends.metrics.server`` (imported by the
composition root); this package exports only the sans-IO parts, so settings can
validate ``--metrics-config`` without importing the service.
"""

from tritium.frontends.metrics.config import MetricsConfig, parse_metrics_config
from tritium.frontends.metrics.exposition import CONTENT_TYPE, Family, render

__all__ = ["CONTENT_TYPE", "Family", "MetricsConfig", "parse_metrics_config", "render"]
