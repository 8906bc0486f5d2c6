"""The first-response histogram: bucket edges as Prometheus' ``le``, Triton's default
buckets, and the per-model override from ``model_metrics``."""

from __future__ import annotations

from tritium.core.latency_histogram import (
    DEFAULT_BUCKETS_MS,
    FIRST_RESPONSE_FAMILY,
    LatencyHistogram,
    first_response_buckets,
)
from tritium.frontends.metrics.collect import first_response_family
from tritium.frontends.metrics.config import MetricsConfig
from tritium.frontends.metrics.exposition import render


def test_values_on_a_bound_belong_to_that_bucket() -> None:
    histogram = LatencyHistogram()
    for value in (0, 100, 101, 500, 4999, 5000, 5001, 90_000):
        histogram.observe(value)
    assert histogram.buckets == DEFAULT_BUCKETS_MS == (100.0, 500.0, 2000.0, 5000.0)
    assert histogram.counts == [2, 2, 0, 2, 2]
    assert histogram.sum == 0 + 100 + 101 + 500 + 4999 + 5000 + 5001 + 90_000


def test_model_metrics_override_the_buckets() -> None:
    config = {
        "model_metrics": {
            "metric_control": [
                {"metric_identifier": {"family": "other"}, "histogram_options": {"buckets": [7]}},
                {
                    "metric_identifier": {"family": FIRST_RESPONSE_FAMILY},
                    "histogram_options": {"buckets": [-1, 0.0, 1, 2.5]},
                },
            ]
        }
    }
    assert first_response_buckets(config) == (-1.0, 0.0, 1.0, 2.5)
    assert first_response_buckets({}) == DEFAULT_BUCKETS_MS


class _Version:
    name, version_str = "stream", "1"

    def __init__(self, histogram: LatencyHistogram | None) -> None:
        self.first_response = histogram


def test_rendered_as_tritons_family() -> None:
    histogram = LatencyHistogram((-1, 0.0, 1, 2.5))
    histogram.observe(2)
    versions = [_Version(histogram), _Version(None)]
    text = render(first_response_family(versions, MetricsConfig(histogram_latencies=True)))
    assert text.decode().splitlines() == [
        f"# HELP {FIRST_RESPONSE_FAMILY} Duration from request to first response in milliseconds",
        f"# TYPE {FIRST_RESPONSE_FAMILY} histogram",
        f'{FIRST_RESPONSE_FAMILY}_count{{model="stream",version="1"}} 1',
        f'{FIRST_RESPONSE_FAMILY}_sum{{model="stream",version="1"}} 2',
        *(
            f'{FIRST_RESPONSE_FAMILY}_bucket{{model="stream",version="1",le="{le}"}} {n}'
            for le, n in (("-1", 0), ("0", 0), ("1", 0), ("2.5", 1), ("+Inf", 1))
        ),
    ]
    assert first_response_family(versions, MetricsConfig()) == []
