"""Applies the notices a worker sends unasked (custom-metric updates), on the server.

Each kind of notice is a message kind of its own (``tritium.ipc.messages``); this module
holds what the server does with each.
"""

from __future__ import annotations

from tritium.core.custom_metrics import registry as custom_metrics
from tritium.ipc.messages import MetricUpdates


def apply_metric_updates(message: MetricUpdates) -> None:
    """Custom-metric changes model code made during its last execution."""
    custom_metrics.apply(message.updates)
