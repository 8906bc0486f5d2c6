"""The recording rules and the rendered PrometheusRule pass promtool; the adapter queries
read the recording rules' series."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from deploycheck import chart, prometheus


def test_recording_rules_pass_promtool(or_skip: Callable[..., Any]) -> None:
    assert or_skip(prometheus.check_rules) == ""


def test_rendered_prometheus_rule_passes_promtool(or_skip: Callable[..., Any]) -> None:
    docs = or_skip(chart.render, {"metrics": {"prometheusRule": {"enabled": True}}})
    assert any(d["kind"] == "PrometheusRule" for d in docs)
    assert or_skip(prometheus.check_prometheus_rule_objects, docs) == []


def test_adapter_queries_use_the_recorded_series(or_skip: Callable[..., Any]) -> None:
    queries = or_skip(prometheus.adapter_queries, "ns", "p-.*")
    assert queries == {
        "tritium_pending_requests": (
            'sum(tritium:pending_requests:sum{namespace="ns",pod=~"p-.*"}) by (pod)'
        ),
        "tritium_queue_time_per_request_us": (
            'max(tritium:queue_time_per_request_us:rate1m{namespace="ns",pod=~"p-.*"}) by (pod)'
        ),
    }
