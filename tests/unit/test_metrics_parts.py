"""Sans-IO parts of the metrics page: text format, --metrics-config, latency summaries,
/proc parsing, the server's custom-metric registry and the worker's update collection."""

from __future__ import annotations

import math

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tritium.backends.python import pb_utils_metrics
from tritium.backends.python.pb_utils import MetricFamily, TritonModelException
from tritium.core.custom_metrics import CustomMetrics
from tritium.core.latency_summary import LatencySummary, SummarizedStatistics
from tritium.core.statistics import BACKEND, CANCELED, REJECTED, ModelStatistics
from tritium.frontends.metrics import Family, parse_metrics_config, render
from tritium.frontends.metrics.collect import custom_families
from tritium.frontends.metrics.exposition import format_value
from tritium.frontends.metrics.system import SystemSampler, parse_cpu_times, parse_meminfo
from tritium.service import ModelTable
from tritium.testing import FakeClock

# -- exposition -------------------------------------------------------------------------


def test_rendered_page_parses_and_escapes_labels() -> None:
    family = Family("nv_inference_count", "Number of inferences\nsecond \\ line", "counter")
    family.add((("model", 'a"b\nc\\d'), ("version", "1")), 3)
    gauge = Family("g", "a gauge", "gauge")
    gauge.add((), 0.25)
    text = render([family, gauge]).decode()
    # One physical line per sample: a newline in a label cannot start a forged sample.
    assert text.count("\n") == 6
    parsed = {f.name: f for f in text_string_to_metric_families(text)}
    (sample,) = parsed["nv_inference_count"].samples
    assert sample.labels == {"model": 'a"b\nc\\d', "version": "1"}
    assert sample.value == 3
    assert parsed["nv_inference_count"].documentation == "Number of inferences\nsecond \\ line"
    assert parsed["g"].samples[0].value == 0.25


def test_values_print_like_triton() -> None:
    assert format_value(156871) == "156871"
    assert format_value(7.0) == "7"
    assert format_value(8.800000011920929) == "8.800000011920929"
    assert format_value(math.nan) == "NaN"
    assert format_value(math.inf) == "+Inf"


# -- --metrics-config -------------------------------------------------------------------


def test_metrics_config_defaults_and_settings() -> None:
    config = parse_metrics_config([])
    assert config.counter_latencies and not config.summary_latencies
    assert [q for q, _ in config.summary_quantiles] == [0.5, 0.9, 0.95, 0.99, 0.999]
    config = parse_metrics_config(
        ["summary_latencies=true", "counter_latencies=false", "summary_quantiles=0.5:0.05,0.99:0.001"]
    )
    assert config.summary_latencies and not config.counter_latencies
    assert config.summary_quantiles == ((0.5, 0.05), (0.99, 0.001))


@pytest.mark.parametrize(
    "entry, message",
    [
        ("summary_latencies", "format is '<setting>=<value>'"),
        ("summary_latencies=maybe", "must be true or false"),
        ("summary_quantiles=0.5", "summary_quantiles must be"),
        ("summary_quantiles=2:0.1", "summary_quantiles must be"),
        ("nonsense=1", "unknown --metrics-config setting 'nonsense'"),
    ],
)
def test_metrics_config_errors(entry: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_metrics_config([entry])


# -- latency summaries ------------------------------------------------------------------


def test_summary_quantiles_over_a_sliding_window() -> None:
    clock = FakeClock()
    summary = LatencySummary(clock, max_age_ns=50, age_buckets=5)
    assert all(math.isnan(v) for v in summary.quantiles([0.5]))
    for us in range(1, 101):
        summary.observe(us * 1000)
    assert summary.count == 100 and summary.sum == 5050
    assert summary.quantiles([0.5, 0.9, 0.99, 1.0]) == [50.0, 90.0, 99.0, 100.0]
    clock.now = 60  # every age bucket rotated out: quantiles forget, count and sum do not
    assert math.isnan(summary.quantiles([0.5])[0])
    summary.observe(7000)
    assert summary.quantiles([0.5]) == [7.0]
    assert summary.count == 101


def test_summary_memory_is_bounded() -> None:
    summary = LatencySummary(FakeClock(), capacity=10)
    for us in range(1000):
        summary.observe(us * 1000)
    assert summary.count == 1000
    assert sum(len(b.values) for b in summary._buckets) == 10


def test_summarized_statistics_count_like_the_plain_ones() -> None:
    stats = SummarizedStatistics(FakeClock())
    stats.record_request(True, 5_000, 1_000)
    stats.record_request(False, 9_000, 0)
    stats.record_execution(rows=2, requests=2, input_ns=1_000, infer_ns=2_000, output_ns=3_000)
    assert stats.success.count == 1 and stats.fail.count == 1
    assert stats.request_summary.count == 1 and stats.request_summary.sum == 5
    assert stats.compute_infer_summary.count == 2
    assert stats.compute_infer_summary.sum * 1000 == stats.compute_infer.ns


def test_failures_by_reason_add_up_to_fail() -> None:
    stats = ModelStatistics()
    stats.record_failure(10, REJECTED)
    stats.record_failure(10, CANCELED)
    stats.record_failure(10, BACKEND)
    stats.record_request(False, 10, 0)  # no reason given: OTHER
    assert stats.failures == [1, 1, 1, 1]
    assert stats.fail.count == 4 and stats.fail.ns == 40


# -- /proc ------------------------------------------------------------------------------


def test_cpu_and_memory_parsing(tmp_path) -> None:
    assert parse_cpu_times("cpu  10 0 10 70 10 0 0 0 0 0\ncpu0 1 2 3 4\n") == (20, 100)
    assert parse_meminfo("MemTotal: 1000 kB\nMemFree: 100 kB\nMemAvailable: 400 kB\n") == (
        1024000,
        614400,
    )
    (tmp_path / "meminfo").write_text("MemTotal: 1000 kB\nMemAvailable: 250 kB\n")
    stat = tmp_path / "stat"
    stat.write_text("cpu  0 0 0 100 0 0 0 0\n")
    sampler = SystemSampler(tmp_path)
    sampler.sample()
    stat.write_text("cpu  30 0 10 140 20 0 0 0\n")  # +40 busy, +60 idle/iowait
    sample = sampler.sample()
    assert sample.cpu_utilization == pytest.approx(0.4)
    assert sample.memory_used_bytes == 750 * 1024


# -- custom metrics ---------------------------------------------------------------------


def test_registry_merges_deltas_from_several_instances() -> None:
    registry = CustomMetrics()
    counter = {"name": "c", "help": "h", "kind": "counter", "labels": [["a", "1"]], "inc": 2.0}
    registry.apply([counter])
    registry.apply([{**counter, "inc": 3.0}])
    gauge = {"name": "g", "help": "h", "kind": "gauge", "labels": [], "set": 4.0}
    registry.apply([gauge, {**gauge, "set": 1.5}])
    hist = {
        "name": "h",
        "help": "h",
        "kind": "histogram",
        "labels": [],
        "buckets": [1.0, 2.0],
        "counts": [1, 0, 2],
        "sum": 7.5,
    }
    registry.apply([hist, hist])
    registry.apply([{**counter, "kind": "gauge", "set": 9.0}])  # conflicting kind: dropped
    text = render(custom_families(registry)).decode()
    parsed = {s.name: s for f in text_string_to_metric_families(text) for s in f.samples}
    assert parsed["c_total"].value == 5.0
    assert parsed["g"].value == 1.5
    assert parsed["h_count"].value == 6 and parsed["h_sum"].value == 15.0
    assert 'h_bucket{le="1"} 2\n' in text and 'h_bucket{le="2"} 2\n' in text
    assert 'h_bucket{le="+Inf"} 6\n' in text


def test_worker_sends_each_change_once() -> None:
    pb_utils_metrics.take_updates()  # drop what other tests left behind
    family = MetricFamily("worker_requests", "d", MetricFamily.COUNTER)
    metric = family.Metric({"k": "v"})
    metric.increment(2)
    metric.increment(1)
    (update,) = pb_utils_metrics.take_updates()
    assert update["inc"] == 3 and update["labels"] == (("k", "v"),)
    assert pb_utils_metrics.take_updates() is None
    metric.increment(4)
    (update,) = pb_utils_metrics.take_updates()
    assert update["inc"] == 4 and metric.value() == 7


@pytest.mark.parametrize("name", ["bad-name", "1x", "", "a b"])
def test_invalid_family_names(name: str) -> None:
    with pytest.raises(TritonModelException, match="Invalid metric name"):
        MetricFamily(name, "d", MetricFamily.COUNTER)


@pytest.mark.parametrize("label", ["bad-label", "__reserved", "1x"])
def test_invalid_label_names(label: str) -> None:
    family = MetricFamily("labelled", "d", MetricFamily.GAUGE)
    with pytest.raises(TritonModelException, match="Invalid label name"):
        family.Metric({label: "x"})


def test_label_values_must_be_strings_and_kinds_known() -> None:
    with pytest.raises(TritonModelException, match="must have a str value"):
        MetricFamily("v", "d", MetricFamily.GAUGE).Metric({"k": 1})  # type: ignore[dict-item]
    with pytest.raises(TritonModelException, match="Invalid metric kind"):
        MetricFamily("v", "d", 7)


# -- the page's switches ----------------------------------------------------------------


class _Service:
    table = ModelTable()  # no models


def test_page_switches() -> None:
    from tritium.frontends.metrics.server import MetricsOptions, MetricsPage

    registry = CustomMetrics()
    full = MetricsPage(_Service(), MetricsOptions(), registry).render().decode()  # type: ignore[arg-type]
    assert "# TYPE nv_cpu_utilization gauge" in full
    assert "# TYPE nv_inference_request_duration_us counter" in full
    assert "summary" not in full
    options = MetricsOptions(
        cpu_metrics=False,
        config=parse_metrics_config(["counter_latencies=false", "summary_latencies=true"]),
    )
    page = MetricsPage(_Service(), options, registry).render().decode()  # type: ignore[arg-type]
    assert "nv_cpu_" not in page and "_duration_us" not in page
    assert "# TYPE nv_inference_request_summary_us summary" in page
    assert "# TYPE nv_inference_request_success counter" in page
