"""The metrics page's families, read from what the server already keeps.

Every per-model number comes from the same ``ModelStatistics`` object the statistics
extension serves (``GET /v2/models/stats``), converted from ns to µs, so the two can
never disagree; the pending count is the scheduler's queue length. Names, help texts,
types and labels are Triton's, in Triton's order.
"""

from __future__ import annotations

from tritium.core.custom_metrics import CustomMetrics
from tritium.core.latency_histogram import FIRST_RESPONSE_FAMILY
from tritium.core.latency_summary import LatencySummary, SummarizedStatistics
from tritium.core.statistics import FAILURE_REASONS, ModelStatistics
from tritium.frontends.metrics.config import MetricsConfig
from tritium.frontends.metrics.exposition import Family, Labels
from tritium.frontends.metrics.gpu import GpuSample
from tritium.frontends.metrics.system import SystemSample
from tritium.service.cache import ResponseStore
from tritium.service.model.interface import ServedVersion

_COUNTERS = (
    ("nv_inference_request_success", "Number of successful inference requests, all batch sizes"),
    ("nv_inference_request_failure", "Number of failed inference requests, all batch sizes"),
    (
        "nv_inference_count",
        "Number of inferences performed (does not include cached requests)",
    ),
    (
        "nv_inference_exec_count",
        "Number of model executions performed (does not include cached requests)",
    ),
)
# (family name, help, ModelStatistics attribute holding the Duration)
_DURATIONS = (
    (
        "nv_inference_request_duration_us",
        "Cumulative inference request duration in microseconds (includes cached requests)",
        "success",
    ),
    (
        "nv_inference_queue_duration_us",
        "Cumulative inference queuing duration in microseconds (includes cached requests)",
        "queue",
    ),
    (
        "nv_inference_compute_input_duration_us",
        "Cumulative compute input duration in microseconds (does not include cached requests)",
        "compute_input",
    ),
    (
        "nv_inference_compute_infer_duration_us",
        "Cumulative compute inference duration in microseconds (does not include cached "
        "requests)",
        "compute_infer",
    ),
    (
        "nv_inference_compute_output_duration_us",
        "Cumulative inference compute output duration in microseconds (does not include "
        "cached requests)",
        "compute_output",
    ),
)
# (family name, help, SummarizedStatistics attribute holding the LatencySummary)
_SUMMARIES = (
    (
        "nv_inference_request_summary_us",
        "Summary of inference request duration in microseconds (includes cached requests)",
        "request_summary",
    ),
    (
        "nv_inference_queue_summary_us",
        "Summary of inference queuing duration in microseconds (includes cached requests)",
        "queue_summary",
    ),
    (
        "nv_inference_compute_input_summary_us",
        "Cumulative compute input duration in microseconds (does not include cached requests)",
        "compute_input_summary",
    ),
    (
        "nv_inference_compute_infer_summary_us",
        "Cumulative compute inference duration in microseconds (does not include cached "
        "requests)",
        "compute_infer_summary",
    ),
    (
        "nv_inference_compute_output_summary_us",
        "Cumulative inference compute output duration in microseconds (does not include "
        "cached requests)",
        "compute_output_summary",
    ),
)
# Per model, for versions with the response cache on: (family, help, Duration attribute,
# whether the number is the count or the µs).
_CACHE_PER_MODEL = (
    ("nv_cache_num_hits_per_model", "Number of cache hits per model", "cache_hit", True),
    (
        "nv_cache_hit_duration_per_model",
        "Total cache hit duration per model, in microseconds",
        "cache_hit",
        False,
    ),
    ("nv_cache_num_misses_per_model", "Number of cache misses per model", "cache_miss", True),
    (
        "nv_cache_miss_duration_per_model",
        "Total cache miss (insert+lookup) duration per model, in microseconds",
        "cache_miss",
        False,
    ),
)
PENDING = (
    "nv_inference_pending_request_count",
    "Instantaneous number of pending requests awaiting execution per-model.",
)
# (family name, help, type, GpuSample attribute): Triton's names and help texts.
_GPU = (
    ("nv_gpu_utilization", "GPU utilization rate [0.0 - 1.0)", "gauge", "utilization"),
    ("nv_gpu_memory_total_bytes", "GPU total memory, in bytes", "gauge", "memory_total_bytes"),
    ("nv_gpu_memory_used_bytes", "GPU used memory, in bytes", "gauge", "memory_used_bytes"),
    ("nv_gpu_power_usage", "GPU power usage in watts", "gauge", "power_usage_watts"),
    ("nv_gpu_power_limit", "GPU power management limit in watts", "gauge", "power_limit_watts"),
    (
        "nv_energy_consumption",
        "GPU energy consumption in joules since the Triton Server started",
        "counter",
        "energy_joules",
    ),
)
# Not one of Triton's (its Python backend restarts a dead stub without counting it); named
# as its per-model counters are.
RESTARTS = (
    "nv_model_restart_count",
    "Number of times an instance of the model was started again after its worker process "
    "exited",
)
FIRST_RESPONSE_HELP = "Duration from request to first response in milliseconds"
CPU_UTILIZATION = ("nv_cpu_utilization", "CPU utilization rate [0.0 - 1.0]")
CPU_MEMORY_TOTAL = ("nv_cpu_memory_total_bytes", "CPU total memory (RAM), in bytes")
CPU_MEMORY_USED = ("nv_cpu_memory_used_bytes", "CPU used memory (RAM), in bytes")


def model_families(versions: list[ServedVersion], config: MetricsConfig) -> list[Family]:
    success, failure, count, execs = (Family(n, h, "counter") for n, h in _COUNTERS)
    durations = [Family(n, h, "counter") for n, h, _ in _DURATIONS] if config.counter_latencies else []
    pending = Family(*PENDING, "gauge")
    for loaded in versions:
        stats: ModelStatistics = loaded.stats
        labels: Labels = (("model", loaded.name), ("version", loaded.version_str))
        success.add(labels, stats.success.count)
        for reason, n in zip(FAILURE_REASONS, stats.failures):
            failure.add((labels[0], ("reason", reason), labels[1]), n)
        count.add(labels, stats.inference_count)
        execs.add(labels, stats.execution_count)
        for family, (_, _, attr) in zip(durations, _DURATIONS):
            family.add(labels, getattr(stats, attr).ns // 1000)
        pending.add(labels, loaded.pending_requests())
    cached = [v for v in versions if v.cache is not None]
    return [success, failure, count, execs, *durations, *_cache_per_model(cached), pending]


def _cache_per_model(versions: list[ServedVersion]) -> list[Family]:
    """Triton's per-model cache counters, listed only for models with the cache on."""
    if not versions:
        return []
    families = []
    for name, text, attr, is_count in _CACHE_PER_MODEL:
        family = Family(name, text, "counter")
        for loaded in versions:
            duration = getattr(loaded.stats, attr)
            labels: Labels = (("model", loaded.name), ("version", loaded.version_str))
            family.add(labels, duration.count if is_count else duration.ns // 1000)
        families.append(family)
    return families


def cache_families(store: ResponseStore | None) -> list[Family]:
    """Triton's server-wide response-cache gauges (a server with a cache only)."""
    if store is None:
        return []
    rows = (
        ("nv_cache_util", "Cache utilization [0.0 - 1.0]", store.utilization),
        ("nv_cache_num_entries", "Number of responses stored in response cache", len(store)),
        ("nv_cache_num_hits", "Number of cache hits in response cache", store.hits),
        ("nv_cache_num_misses", "Number of cache misses in response cache", store.misses),
        ("nv_cache_num_lookups", "Number of cache lookups in response cache", store.lookups),
        (
            "nv_cache_num_evictions",
            "Number of cache evictions in response cache",
            store.evictions,
        ),
        (
            "nv_cache_lookup_duration",
            "Total cache lookup duration (hit and miss), in microseconds",
            store.lookup_ns // 1000,
        ),
        (
            "nv_cache_insertion_duration",
            "Total cache insertion duration, in microseconds",
            store.insertion_ns // 1000,
        ),
    )
    families = []
    for name, text, value in rows:
        family = Family(name, text, "gauge")
        family.add((), value)
        families.append(family)
    return families


def restart_family(versions: list[ServedVersion]) -> list[Family]:
    """Restarts per model version, over its instances (ensembles have none of their own)."""
    family = Family(*RESTARTS, "counter")
    for loaded in versions:
        if loaded.instances:
            labels: Labels = (("model", loaded.name), ("version", loaded.version_str))
            family.add(labels, sum(i.restarts for i in loaded.instances))
    return [family]


def summary_families(versions: list[ServedVersion], config: MetricsConfig) -> list[Family]:
    if not config.summary_latencies:
        return []
    quantiles = [q for q, _ in config.summary_quantiles]
    families = []
    for name, help_text, attr in _SUMMARIES:
        family = Family(name, help_text, "summary")
        for loaded in versions:
            stats = loaded.stats
            if not isinstance(stats, SummarizedStatistics):
                continue  # loaded before summaries were on (cannot happen from the CLI)
            summary: LatencySummary = getattr(stats, attr)
            labels: Labels = (("model", loaded.name), ("version", loaded.version_str))
            family.add(labels, summary.count, "_count")
            family.add(labels, summary.sum, "_sum")
            for q, value in zip(quantiles, summary.quantiles(quantiles)):
                family.add((*labels, ("quantile", _quantile_label(q))), value)
        families.append(family)
    return families


def _quantile_label(q: float) -> str:
    return repr(q) if not q.is_integer() else str(int(q))


def first_response_family(versions: list[ServedVersion], config: MetricsConfig) -> list[Family]:
    """Triton's first-response histogram; only decoupled models have one."""
    if not config.histogram_latencies:
        return []
    family = Family(FIRST_RESPONSE_FAMILY, FIRST_RESPONSE_HELP, "histogram")
    for loaded in versions:
        histogram = loaded.first_response
        if histogram is None:
            continue
        labels: Labels = (("model", loaded.name), ("version", loaded.version_str))
        family.add(labels, sum(histogram.counts), "_count")
        family.add(labels, histogram.sum, "_sum")
        _add_buckets(family, labels, histogram.buckets, histogram.counts)
    return [family]


def _add_buckets(
    family: Family, labels: Labels, bounds: tuple[float, ...], counts: list[int]
) -> None:
    cumulative = 0
    for bound, n in zip((*bounds, float("inf")), counts):
        cumulative += n
        le = "+Inf" if bound == float("inf") else _bucket_label(bound)
        family.add((*labels, ("le", le)), cumulative, "_bucket")


def custom_families(registry: CustomMetrics) -> list[Family]:
    families = []
    for name in sorted(registry.families):
        custom = registry.families[name]
        family = Family(custom.name, custom.help, custom.kind)
        for labels, series in sorted(custom.series.items()):
            if custom.kind != "histogram":
                family.add(labels, series.value)
                continue
            family.add(labels, sum(series.counts), "_count")
            family.add(labels, series.sum, "_sum")
            _add_buckets(family, labels, series.buckets, series.counts)
        families.append(family)
    return families


def _bucket_label(bound: float) -> str:
    return str(int(bound)) if bound.is_integer() else repr(bound)


def gpu_families(samples: tuple[GpuSample, ...]) -> list[Family]:
    """One family per GPU reading, a sample per GPU; none at all without a GPU."""
    if not samples:
        return []
    families = []
    for name, help_text, kind, attr in _GPU:
        family = Family(name, help_text, kind)
        for sample in samples:
            family.add((("gpu_uuid", sample.uuid),), getattr(sample, attr))
        families.append(family)
    return families


def cpu_families(sample: SystemSample) -> list[Family]:
    families = []
    for (name, help_text), value in (
        (CPU_UTILIZATION, sample.cpu_utilization),
        (CPU_MEMORY_TOTAL, sample.memory_total_bytes),
        (CPU_MEMORY_USED, sample.memory_used_bytes),
    ):
        family = Family(name, help_text, "gauge")
        family.add((), value)
        families.append(family)
    return families
