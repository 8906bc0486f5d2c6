"""Every option of `tritium serve`, held in one frozen, validated dataclass.

Field names are `tritonserver`'s flag names with dashes turned into underscores, and the
defaults are Triton's, so a deployment can keep its arguments. The command line
(`tritium.cli`) is generated from these fields: each field's metadata carries its help
text and, where the field's type is not enough, how its flag is spelled or parsed.
Constructing a `Settings` validates it; an invalid combination raises `ValueError` with a
message naming the flag, so the same checks serve the CLI and programmatic callers.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tritium.frontends.metrics.config import parse_metrics_config
from tritium.frontends.restricted import GRPC_HEADER_PREFIX, RestrictedApis
from tritium.service.lifecycle.settings import lifecycle_options
from tritium.service.tracing.settings import parse_trace_config

MODEL_CONTROL_MODES = ("none", "poll", "explicit")
LOG_FORMATS = ("default", "ISO8601")
GRPC_COMPRESSION_LEVELS = ("none", "low", "medium", "high")
GRPC_IMPLEMENTATIONS = ("native", "grpcio")


def _opt(default: Any, help: str, group: str, **cli: Any) -> Any:
    """One setting: its default, its help text, its help-section and any CLI hints.

    CLI hints (all optional): `aliases` (extra flag spellings), `choices`, `fold_case`
    (choices compared case-insensitively), `kind` ("switch": a flag without a value;
    "level": an integer that also accepts true/false), `metavar`, `int_bits` (64 for
    byte sizes; Triton parses other integers as 32-bit), `deprecated_alias` (an old
    boolean flag that sets this field, with Triton's deprecation warning).
    """
    return field(default=default, metadata={"help": help, "group": group, **cli})


@dataclass(frozen=True)
class Settings:
    """Server options; see each field's help text (shown by `tritium serve --help`)."""

    # --- Server -------------------------------------------------------------------------
    id: str = _opt("triton", "Identifier of this server, reported by server metadata.", "Server")
    exit_timeout_secs: int = _opt(
        30,
        "Seconds to wait at shutdown for in-flight inferences to finish; after that the "
        "server exits even if some are still running.",
        "Server",
    )

    busy_poll_us: int = _opt(
        1000,
        "While exactly one inference request is in flight, the event loop keeps polling its "
        "sockets instead of sleeping, for up to this many microseconds per request, and the "
        "model instances that served it poll as long for their next batch, so answers and "
        "the next request are picked up without a wake-up (lower latency for a lone client, "
        "at the price of that CPU time). 0 turns polling off.",
        "Server",
    )
    busy_poll_linger_us: int = _opt(
        150,
        "After the last in-flight request is answered, the event loop keeps polling this "
        "many microseconds for the client's next request before it sleeps (0: sleep at "
        "once). An idle server does not poll.",
        "Server",
    )

    busy_poll_worker_us: int = _opt(
        300,
        "A model instance's process polls for its next batch up to this many microseconds "
        "before it sleeps, when its last wait was shorter than that (batches coming back "
        "to back, or a lone client's next request); one whose batches come further apart "
        "sleeps at once, as does an idle one. 0 turns polling off.",
        "Server",
    )

    # --- Logging ------------------------------------------------------------------------
    log_verbose: int = _opt(
        0,
        "Verbose logging level. 0 disables verbose logging, values >= 1 enable it "
        "(true/false are read as 1/0).",
        "Logging",
        kind="level",
    )
    log_info: bool = _opt(True, "Enable info-level logging.", "Logging")
    log_warning: bool = _opt(True, "Enable warning-level logging.", "Logging")
    log_error: bool = _opt(True, "Enable error-level logging.", "Logging")
    log_format: str = _opt(
        "default",
        'Log line format: "default" (severity and "MMDD hh:mm:ss.ssssss" timestamp) or '
        '"ISO8601" ("YYYY-MM-DDThh:mm:ssZ" timestamp, then severity).',
        "Logging",
        choices=LOG_FORMATS,
    )
    log_file: str = _opt(
        "", "Write the log to this file instead of the console.", "Logging", metavar="<path>"
    )

    # --- Model repository ---------------------------------------------------------------
    model_repository: tuple[str, ...] = _opt(
        (),
        "Path of a model repository directory. With several repositories, a model name "
        "found in more than one of them is not served.",
        "Model Repository",
        aliases=("--model-store",),
        metavar="<path>",
    )
    exit_on_error: bool = _opt(
        True,
        "Exit if an error occurs during initialization (e.g. a model fails to load).",
        "Model Repository",
    )
    disable_auto_complete_config: bool = _opt(
        False,
        "Do not auto-complete model configurations: every model needs a config.pbtxt that "
        "specifies all required settings.",
        "Model Repository",
        kind="switch",
        deprecated_alias="--strict-model-config",
    )
    strict_readiness: bool = _opt(
        True,
        "If true, /v2/health/ready reports ready only when the server is live and every "
        "model is ready; if false, it reports ready as soon as the server is live.",
        "Model Repository",
    )
    model_control_mode: str = _opt(
        "none",
        'How models are managed. "none": load every model at start-up and never change '
        'them. "poll": watch the repositories (every --repository-poll-secs) and load, '
        'reload or unload models as they change. "explicit": load and unload only through '
        "the model control API; at start-up load only the models named by --load-model.",
        "Model Repository",
        choices=MODEL_CONTROL_MODES,
        fold_case=True,
    )
    repository_poll_secs: int = _opt(
        15,
        "Seconds between two scans of the model repositories. Used only with "
        "--model-control-mode=poll.",
        "Model Repository",
    )
    load_model: tuple[str, ...] = _opt(
        (),
        "Model to load at start-up, or '*' (given alone) for every model. Requires "
        "--model-control-mode=explicit.",
        "Model Repository",
        metavar="<model>",
    )
    model_config_name: str = _opt(
        "",
        "Name of an alternative configuration to load for every model: "
        "<model>/configs/<name>.pbtxt is used instead of config.pbtxt where it exists. "
        "Must not contain spaces.",
        "Model Repository",
        metavar="<name>",
    )
    model_load_thread_count: int = _opt(
        4, "Number of models loaded concurrently.", "Model Repository"
    )
    model_load_retry_count: int = _opt(
        0, "Number of times a failed model load is retried.", "Model Repository"
    )

    # --- HTTP ---------------------------------------------------------------------------
    allow_http: bool = _opt(True, "Serve the HTTP/REST endpoints.", "HTTP")
    http_address: str = _opt("0.0.0.0", "Address the HTTP server binds to.", "HTTP")
    http_port: int = _opt(8000, "Port of the HTTP server.", "HTTP")
    reuse_http_port: bool = _opt(
        False,
        "Bind the HTTP port with SO_REUSEPORT, so several servers (serving the same models) "
        "can share it.",
        "HTTP",
    )
    http_max_input_size: int = _opt(
        64 * 2**20,
        "Largest HTTP request body accepted, in bytes; larger requests are rejected.",
        "HTTP",
        int_bits=64,
    )

    # --- GRPC ---------------------------------------------------------------------------
    allow_grpc: bool = _opt(True, "Serve the gRPC endpoints.", "GRPC")
    grpc_address: str = _opt("0.0.0.0", "Address the gRPC server binds to.", "GRPC")
    grpc_port: int = _opt(8001, "Port of the gRPC server.", "GRPC")
    reuse_grpc_port: bool = _opt(
        False,
        "Bind the gRPC port with SO_REUSEPORT, so several servers (serving the same models) "
        "can share it.",
        "GRPC",
    )
    grpc_implementation: str = _opt(
        "native",
        "Which gRPC transport serves the endpoint: native (tritium's own HTTP/2 server) or "
        "grpcio (the grpcio library's server). Both serve the same methods.",
        "GRPC",
        choices=GRPC_IMPLEMENTATIONS,
        fold_case=True,
    )
    grpc_use_ssl: bool = _opt(False, "Serve gRPC over TLS.", "GRPC")
    grpc_use_ssl_mutual: bool = _opt(
        False,
        "Serve gRPC over mutually authenticated TLS (clients must present a certificate "
        "signed by --grpc-root-cert). Implies --grpc-use-ssl.",
        "GRPC",
    )
    grpc_server_cert: str = _opt(
        "", "PEM file holding the server certificate (for TLS).", "GRPC", metavar="<path>"
    )
    grpc_server_key: str = _opt(
        "", "PEM file holding the server private key (for TLS).", "GRPC", metavar="<path>"
    )
    grpc_root_cert: str = _opt(
        "",
        "PEM file holding the root certificate that client certificates must chain to "
        "(for mutual TLS).",
        "GRPC",
        metavar="<path>",
    )
    grpc_infer_response_compression_level: str = _opt(
        "none",
        "Compression applied to inference responses: none, low, medium or high.",
        "GRPC",
        choices=GRPC_COMPRESSION_LEVELS,
        fold_case=True,
    )
    grpc_keepalive_time: int = _opt(
        7_200_000, "Milliseconds between keepalive pings sent on a connection.", "GRPC"
    )
    grpc_keepalive_timeout: int = _opt(
        20_000,
        "Milliseconds to wait for a keepalive ping acknowledgement before closing the connection.",
        "GRPC",
    )
    grpc_keepalive_permit_without_calls: bool = _opt(
        False, "Allow keepalive pings on connections with no call in flight.", "GRPC"
    )
    grpc_http2_max_pings_without_data: int = _opt(
        2,
        "Most pings sent while there is no data or header frame to send (0: no limit).",
        "GRPC",
    )
    grpc_http2_min_recv_ping_interval_without_data: int = _opt(
        300_000,
        "Minimum milliseconds expected between two pings received while no data is sent; "
        "a ping arriving sooner counts as a ping strike.",
        "GRPC",
    )
    grpc_http2_max_ping_strikes: int = _opt(
        2,
        "Ping strikes tolerated before the connection is closed with GOAWAY (0: no limit).",
        "GRPC",
    )
    grpc_max_connection_age: int | None = _opt(
        None,
        "Milliseconds a connection may live before it is gracefully closed (unset: forever).",
        "GRPC",
    )
    grpc_max_connection_age_grace: int | None = _opt(
        None,
        "Milliseconds granted to calls still running on a connection closed for its age "
        "(unset: no limit).",
        "GRPC",
    )

    # --- Shared memory ------------------------------------------------------------------
    allow_client_shm: bool = _opt(
        True,
        "Let clients register system shared-memory regions (the shared-memory extension). "
        "On by default, as in Triton, so tritonclient's shm utilities and perf_analyzer "
        "--shared-memory=system work; turn it off when untrusted clients can reach the "
        "server, since a registered key is opened with the server's permissions.",
        "Shared memory",
    )

    # --- Metrics ------------------------------------------------------------------------
    allow_metrics: bool = _opt(True, "Serve Prometheus metrics.", "Metrics")
    allow_cpu_metrics: bool = _opt(
        True,
        "Report CPU and memory metrics. Ignored unless --allow-metrics is true.",
        "Metrics",
    )
    allow_gpu_metrics: bool = _opt(
        True,
        "Report GPU metrics (utilization, memory, power, energy) for each visible NVIDIA "
        "GPU, read through NVML (needs tritium[gpu]); nothing without a GPU. Ignored "
        "unless --allow-metrics is true.",
        "Metrics",
    )
    metrics_address: str = _opt(
        "", "Address the metrics server binds to (default: --http-address).", "Metrics"
    )
    metrics_port: int = _opt(8002, "Port of the metrics server.", "Metrics")
    metrics_interval_ms: int = _opt(
        2000, "Milliseconds between two collections of the polled metrics.", "Metrics"
    )
    metrics_config: tuple[str, ...] = _opt(
        (),
        "Metrics setting, as <setting>=<value>: counter_latencies=<bool> (default true), "
        "summary_latencies=<bool> (default false), summary_quantiles=<q>:<error>,... , "
        "histogram_latencies=<bool> (default false).",
        "Metrics",
        metavar="<setting>=<value>",
    )

    # --- Tracing ------------------------------------------------------------------------
    trace_config: tuple[str, ...] = _opt(
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

    # --- Backend ------------------------------------------------------------------------
    backend_config: tuple[tuple[str, str, str], ...] = _opt(
        (),
        "Backend setting, as <backend>,<setting>=<value> (e.g. python,shm-default-byte-size="
        "1048576), or <setting>=<value> for every backend.",
        "Backend",
        metavar="<backend>,<setting>=<value>",
    )

    # --- Connection limits and restricted APIs ------------------------------------------
    http_keep_alive_timeout_secs: int = _opt(
        75,
        "Seconds an HTTP connection may stay idle between requests before it is closed "
        "(0: never).",
        "HTTP",
    )
    http_header_timeout_secs: int = _opt(
        30,
        "Seconds a client has to send a whole HTTP request head, however slowly its bytes "
        "arrive; answered 408 and closed after that (0: no limit).",
        "HTTP",
    )
    http_body_timeout_secs: int = _opt(
        60,
        "Seconds an HTTP request body may go without receiving a byte; answered 408 and "
        "closed after that (0: no limit).",
        "HTTP",
    )
    http_restricted_api: tuple[str, ...] = field(
        default=(),
        repr=False,  # holds secret values
        metadata={
            "help": "Restrict API groups, as <group>[,<group>...]:<key>=<value>: requests to "
            "them must carry header <key> with value <value>, else 403. Groups: health, "
            "metadata, inference, shared-memory, model-config, model-repository, statistics, "
            "trace, logging.",
            "group": "HTTP",
            "metavar": "<groups>:<key>=<value>",
        },
    )
    grpc_idle_timeout_secs: int = _opt(
        300,
        "Seconds a gRPC connection may stay open with no call in flight before it is "
        "closed with GOAWAY; clients reconnect transparently (0: never).",
        "GRPC",
    )
    grpc_restricted_protocol: tuple[str, ...] = field(
        default=(),
        repr=False,  # holds secret values
        metadata={
            "help": "Restrict gRPC method groups, as <group>[,<group>...]:<key>=<value>: calls "
            "to them must carry metadata triton-grpc-protocol-<key> with value <value>, else "
            "UNAVAILABLE. Groups as for --http-restricted-api.",
            "group": "GRPC",
            "metavar": "<groups>:<key>=<value>",
        },
    )

    client_shm_max_regions: int = _opt(
        4096,
        "Most system shared-memory regions clients may have registered at once; one more "
        "is refused with 400.",
        "Shared memory",
    )
    client_shm_max_bytes: int = _opt(
        64 * 2**30,
        "Most bytes of system shared memory clients may have registered at once, all "
        "regions together; a registration past it is refused with 400.",
        "Shared memory",
        int_bits=64,
    )
    client_shm_key_prefix: str = _opt(
        "",
        "Accept only shared-memory keys starting with this prefix (e.g. 'triton_client_'). "
        "Empty (Triton's behaviour): any object the server may open can be registered.",
        "Shared memory",
        metavar="<prefix>",
    )

    @property
    def http_restrictions(self) -> RestrictedApis:
        return RestrictedApis.parse(self.http_restricted_api, "--http-restricted-api")

    @property
    def grpc_restrictions(self) -> RestrictedApis:
        return RestrictedApis.parse(
            self.grpc_restricted_protocol, "--grpc-restricted-protocol", GRPC_HEADER_PREFIX
        )

    def __post_init__(self) -> None:
        _normalize(self)
        _validate(self)
        _validate_limits(self)

    @property
    def auto_complete_config(self) -> bool:
        """Whether missing model configuration may be derived (Triton's default: yes)."""
        return not self.disable_auto_complete_config


def _set(settings: Settings, name: str, value: object) -> None:
    # The dataclass is frozen for its users; normalisation runs once, during __init__.
    object.__setattr__(settings, name, value)


def _normalize(s: Settings) -> None:
    """Coerce convenient inputs (lists, a lone string) and resolve derived defaults."""
    for name in ("model_repository", "load_model"):
        value = getattr(s, name)
        items = (value,) if isinstance(value, str) else tuple(value)
        # Triton keeps these in sets: repeating a path or a model name is harmless.
        _set(s, name, tuple(dict.fromkeys(items)))
    _set(s, "backend_config", tuple(tuple(entry) for entry in s.backend_config))
    for name in ("metrics_config", "trace_config"):
        value = getattr(s, name)
        _set(s, name, (value,) if isinstance(value, str) else tuple(value))
    _set(s, "model_control_mode", s.model_control_mode.lower())
    _set(s, "grpc_implementation", s.grpc_implementation.lower())
    _set(
        s,
        "grpc_infer_response_compression_level",
        s.grpc_infer_response_compression_level.lower(),
    )
    if not s.metrics_address:
        # Triton binds metrics next to HTTP unless told otherwise.
        _set(s, "metrics_address", s.http_address)
    if s.grpc_use_ssl_mutual:
        _set(s, "grpc_use_ssl", True)


def _validate(s: Settings) -> None:
    if not s.model_repository:
        raise ValueError("--model-repository must be specified")
    if any(not path for path in s.model_repository):
        raise ValueError("--model-repository must not be empty")
    for name in ("http_port", "grpc_port", "metrics_port"):
        port = getattr(s, name)
        if not 0 <= port <= 65535:
            raise ValueError(f"--{_flag(name)} must be between 0 and 65535, got {port}")
    _check_port_collision(s)
    non_negative = (
        "exit_timeout_secs",
        "busy_poll_us",
        "busy_poll_linger_us",
        "busy_poll_worker_us",
        "log_verbose",
        "repository_poll_secs",
        "model_load_retry_count",
        "metrics_interval_ms",
        "grpc_keepalive_time",
        "grpc_keepalive_timeout",
        "grpc_http2_max_pings_without_data",
        "grpc_http2_min_recv_ping_interval_without_data",
        "grpc_http2_max_ping_strikes",
        "grpc_max_connection_age",
        "grpc_max_connection_age_grace",
    )
    for name in non_negative:
        value = getattr(s, name)
        if value is not None and value < 0:
            raise ValueError(f"--{_flag(name)} must be >= 0, got {value}")
    for name in ("model_load_thread_count", "http_max_input_size"):
        if getattr(s, name) <= 0:
            raise ValueError(f"--{_flag(name)} must be > 0, got {getattr(s, name)}")
    _check_choice(s, "model_control_mode", MODEL_CONTROL_MODES)
    _check_choice(s, "log_format", LOG_FORMATS)
    parse_metrics_config(s.metrics_config)  # raises ValueError naming the bad setting
    parse_trace_config(s.trace_config)
    _check_choice(s, "grpc_infer_response_compression_level", GRPC_COMPRESSION_LEVELS)
    _check_choice(s, "grpc_implementation", GRPC_IMPLEMENTATIONS)
    if s.load_model and s.model_control_mode != "explicit":
        # Triton's wording: the flag would otherwise be silently ignored.
        raise ValueError(
            "Use of '--load-model' requires setting '--model-control-mode=explicit' as well."
        )
    if "*" in s.load_model and len(s.load_model) > 1:
        raise ValueError(
            "Wildcard model name '*' must be the ONLY startup model if specified at all."
        )
    if any(ch.isspace() for ch in s.model_config_name):
        raise ValueError(
            f"--model-config-name must not contain spaces, got {s.model_config_name!r}"
        )
    for entry in s.backend_config:
        if len(entry) != 3 or not all(isinstance(part, str) for part in entry):
            raise ValueError(
                f"--backend-config entries are (backend, setting, value), got {entry!r}"
            )
        if not entry[1] or not entry[2]:
            raise ValueError(
                "--backend-config option format is '<backend name>,<setting>=<value>'. "
                f"Got {entry!r}"
            )
    # Model life-cycle settings (--backend-config=python,...) fail like a bad flag.
    lifecycle_options(s.backend_config)
    if s.allow_grpc and s.grpc_use_ssl:
        if not (s.grpc_server_cert and s.grpc_server_key):
            raise ValueError("--grpc-use-ssl requires --grpc-server-cert and --grpc-server-key")
        if s.grpc_use_ssl_mutual and not s.grpc_root_cert:
            raise ValueError("--grpc-use-ssl-mutual requires --grpc-root-cert")


def _validate_limits(s: Settings) -> None:
    for name in (
        "http_keep_alive_timeout_secs",
        "http_header_timeout_secs",
        "http_body_timeout_secs",
        "grpc_idle_timeout_secs",
    ):
        if getattr(s, name) < 0:
            raise ValueError(f"--{_flag(name)} must be >= 0, got {getattr(s, name)}")
    for name in ("client_shm_max_regions", "client_shm_max_bytes"):
        if getattr(s, name) <= 0:
            raise ValueError(f"--{_flag(name)} must be > 0, got {getattr(s, name)}")
    if "/" in s.client_shm_key_prefix.lstrip("/") or "\x00" in s.client_shm_key_prefix:
        raise ValueError("--client-shm-key-prefix must not contain '/' (after a leading one)")
    for name in ("http_restricted_api", "grpc_restricted_protocol"):
        value = getattr(s, name)
        _set(s, name, (value,) if isinstance(value, str) else tuple(value))
    # Parsed once here so a malformed spec fails start-up (messages never echo values).
    s.http_restrictions  # noqa: B018
    s.grpc_restrictions  # noqa: B018


def _check_choice(s: Settings, name: str, choices: tuple[str, ...]) -> None:
    value = getattr(s, name)
    if value not in choices:
        allowed = ", ".join(repr(c) for c in choices)
        raise ValueError(f"invalid argument for --{_flag(name)}: {value!r} (choose from {allowed})")


def _check_port_collision(s: Settings) -> None:
    """Refuse two enabled services on one address and port, as Triton does.

    Port 0 asks the OS for a free port, so several services may all ask for it.
    """
    services = [
        ("HTTP", s.allow_http, s.http_address, s.http_port),
        ("GRPC", s.allow_grpc, s.grpc_address, s.grpc_port),
        ("metrics", s.allow_metrics, s.metrics_address, s.metrics_port),
    ]
    enabled = [(name, addr, port) for name, on, addr, port in services if on and port != 0]
    for i, (name, addr, port) in enumerate(enabled):
        for other, other_addr, other_port in enabled[i + 1 :]:
            if (addr, port) == (other_addr, other_port):
                raise ValueError(
                    f"The server cannot listen to {name} requests and {other} requests "
                    f"at the same address and port {addr}:{port}"
                )


def _flag(name: str) -> str:
    return name.replace("_", "-")
