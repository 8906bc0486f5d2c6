"""The options of the server's features: metrics, tracing, response cache, backends, rate
limiter."""

from __future__ import annotations

from dataclasses import dataclass

from tritium.server import settings_checks as checks
from tritium.server.settings_field import opt


@dataclass(frozen=True)
class FeatureSettings:
    """Feature options (part of ``Settings``)."""

    # --- Metrics ------------------------------------------------------------------------
    allow_metrics: bool = opt(True, "Serve Prometheus metrics.", "Metrics")
    allow_cpu_metrics: bool = opt(
        True,
        "Report CPU and memory metrics. Ignored unless --allow-metrics is true.",
        "Metrics",
    )
    allow_gpu_metrics: bool = opt(
        True,
        "Report GPU metrics (utilization, memory, power, energy) for each visible NVIDIA "
        "GPU, read through NVML (needs tritium[gpu]); nothing without a GPU. Ignored "
        "unless --allow-metrics is true.",
        "Metrics",
    )
    metrics_address: str = opt(
        "", "Address the metrics server binds to (default: --http-address).", "Metrics"
    )
    metrics_port: int = opt(8002, "Port of the metrics server.", "Metrics")
    metrics_interval_ms: int = opt(
        2000, "Milliseconds between two collections of the polled metrics.", "Metrics"
    )
    metrics_config: tuple[str, ...] = opt(
        (),
        "Metrics setting, as <setting>=<value>: counter_latencies=<bool> (default true), "
        "summary_latencies=<bool> (default false), summary_quantiles=<q>:<error>,... , "
        "histogram_latencies=<bool> (default false).",
        "Metrics",
        metavar="<setting>=<value>",
    )

    # --- Tracing ------------------------------------------------------------------------
    trace_config: tuple[str, ...] = opt(
        (),
        "Trace setting, as <setting>=<value> for level (OFF or TIMESTAMPS), rate (trace "
        "one request in N), count (traces to take, -1: no limit) and mode (triton or "
        "opentelemetry), or triton,<setting>=<value> for file (the trace file) and "
        "log-frequency (write a file every N traces; 0: at shutdown), or "
        "opentelemetry,<setting>=<value> for url (the OTLP/HTTP receiver), resource "
        "(<key>=<value>), bsp_max_queue_size, bsp_schedule_delay and "
        "bsp_max_export_batch_size (needs tritium[opentelemetry]).",
        "Tracing",
        metavar="[<mode>,]<setting>=<value>",
    )

    # --- Response cache -----------------------------------------------------------------
    cache_config: tuple[str, ...] = opt(
        (),
        "Response cache of models with response_cache { enable: true }.",
        "Cache",
        metavar="local,size=<bytes>",
    )
    cache_directory: str = opt("", "Accepted as tritonserver takes it (no effect).", "Cache")
    response_cache_byte_size: int | None = opt(None, "Old --cache-config local,size=N.", "Cache")

    # --- Backend ------------------------------------------------------------------------
    backend_config: tuple[tuple[str, str, str], ...] = opt(
        (),
        "Backend setting, as <backend>,<setting>=<value> (e.g. python,shm-default-byte-size="
        "1048576), or <setting>=<value> for every backend.",
        "Backend",
        metavar="<backend>,<setting>=<value>",
    )

    # --- Rate limiter (docs/rate-limiter.md) --------------------------------------------
    rate_limit: str = opt(
        "off",
        '"execution_count": an instance runs a batch only once the resources its instance '
        "group's rate_limiter lists are free, and instances waiting for them go by priority "
        'and by how often they ran; "off": rate_limiter settings are ignored and a batch '
        "runs as soon as an instance is free.",
        "Rate Limiter",
        choices=checks.RATE_LIMIT_MODES,
        fold_case=True,
    )
    rate_limit_resource: tuple[str, ...] = opt(
        (),
        "Copies of a resource the rate limiter hands out, as <name>:<count>[:<device>] "
        "(without a device: on every device; a resource the models mark global has one "
        "set of copies whatever the device). Once one is given, a resource not listed has "
        "none and a model needing more than listed fails to load. Default: for each "
        "resource, the most any one instance needs.",
        "Rate Limiter",
        metavar="<name>:<count>[:<device>]",
    )
