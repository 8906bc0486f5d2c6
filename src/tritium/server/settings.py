"""Every option of `tritium serve`, held in one frozen, validated dataclass.

Field names are `tritonserver`'s flag names with dashes turned into underscores, and the
defaults are Triton's, so a deployment can keep its arguments. The command line
(`tritium.cli`) is generated from these fields: each field's metadata carries its help
text and, where the field's type is not enough, how its flag is spelled or parsed.
Constructing a `Settings` validates it (`settings_checks`); an invalid combination raises
`ValueError` with a message naming the flag, so the same checks serve the CLI and
programmatic callers.
"""

from __future__ import annotations

from dataclasses import dataclass

from tritium.frontends.restricted import RestrictedApis
from tritium.server import settings_checks as checks
from tritium.server.settings_field import opt


@dataclass(frozen=True)
class Settings:
    """Server options; see each field's help text (shown by `tritium serve --help`)."""

    # --- Server -------------------------------------------------------------------------
    id: str = opt("triton", "Identifier of this server, reported by server metadata.", "Server")
    exit_timeout_secs: int = opt(
        30,
        "Seconds to wait at shutdown for in-flight inferences to finish; after that the "
        "server exits even if some are still running.",
        "Server",
    )
    drain_delay_secs: int = opt(
        0,
        "Seconds to keep serving after SIGTERM while answering not-ready (so that load "
        "balancers stop sending first), before new connections are refused. 0: at once.",
        "Server",
    )

    busy_poll_us: int = opt(
        1000,
        "While exactly one inference request is in flight, the event loop keeps polling its "
        "sockets instead of sleeping, for up to this many microseconds per request, and the "
        "model instances that served it poll as long for their next batch, so answers and "
        "the next request are picked up without a wake-up (lower latency for a lone client, "
        "at the price of that CPU time). 0 turns polling off.",
        "Server",
    )
    busy_poll_linger_us: int = opt(
        150,
        "After the last in-flight request is answered, the event loop keeps polling this "
        "many microseconds for the client's next request before it sleeps (0: sleep at "
        "once). An idle server does not poll.",
        "Server",
    )

    busy_poll_worker_us: int = opt(
        300,
        "A model instance's process polls for its next batch up to this many microseconds "
        "before it sleeps, when its last wait was shorter than that (batches coming back "
        "to back, or a lone client's next request); one whose batches come further apart "
        "sleeps at once, as does an idle one. 0 turns polling off.",
        "Server",
    )

    # --- Logging ------------------------------------------------------------------------
    log_verbose: int = opt(
        0,
        "Verbose logging level. 0 disables verbose logging, values >= 1 enable it "
        "(true/false are read as 1/0).",
        "Logging",
        kind="level",
    )
    log_info: bool = opt(True, "Enable info-level logging.", "Logging")
    log_warning: bool = opt(True, "Enable warning-level logging.", "Logging")
    log_error: bool = opt(True, "Enable error-level logging.", "Logging")
    log_format: str = opt(
        "default",
        'Log line format: "default" (severity and "MMDD hh:mm:ss.ssssss" timestamp) or '
        '"ISO8601" ("YYYY-MM-DDThh:mm:ssZ" timestamp, then severity).',
        "Logging",
        choices=checks.LOG_FORMATS,
    )
    log_file: str = opt(
        "", "Write the log to this file instead of the console.", "Logging", metavar="<path>"
    )

    # --- Model repository ---------------------------------------------------------------
    model_repository: tuple[str, ...] = opt(
        (),
        "Path of a model repository directory, or a cloud location served from a local "
        "copy (s3://bucket/path, s3://host:port/bucket/path, gs://bucket/path, "
        "as://account/container/path). With several repositories, a model name "
        "found in more than one of them is not served.",
        "Model Repository",
        aliases=("--model-store",),
        metavar="<path>",
    )
    exit_on_error: bool = opt(
        True,
        "Exit if an error occurs during initialization (e.g. a model fails to load).",
        "Model Repository",
    )
    disable_auto_complete_config: bool = opt(
        False,
        "Do not auto-complete model configurations: every model needs a config.pbtxt that "
        "specifies all required settings.",
        "Model Repository",
        kind="switch",
        deprecated_alias="--strict-model-config",
    )
    strict_readiness: bool = opt(
        True,
        "If true, /v2/health/ready reports ready only when the server is live and every "
        "model is ready; if false, it reports ready as soon as the server is live.",
        "Model Repository",
    )
    model_control_mode: str = opt(
        "none",
        'How models are managed. "none": load every model at start-up and never change '
        'them. "poll": watch the repositories (every --repository-poll-secs) and load, '
        'reload or unload models as they change. "explicit": load and unload only through '
        "the model control API; at start-up load only the models named by --load-model.",
        "Model Repository",
        choices=checks.MODEL_CONTROL_MODES,
        fold_case=True,
    )
    repository_poll_secs: int = opt(
        15,
        "Seconds between two scans of the model repositories. Used only with "
        "--model-control-mode=poll.",
        "Model Repository",
    )
    load_model: tuple[str, ...] = opt(
        (),
        "Model to load at start-up, or '*' (given alone) for every model. Requires "
        "--model-control-mode=explicit.",
        "Model Repository",
        metavar="<model>",
    )
    model_config_name: str = opt(
        "",
        "Name of an alternative configuration to load for every model: "
        "<model>/configs/<name>.pbtxt is used instead of config.pbtxt where it exists. "
        "Must not contain spaces.",
        "Model Repository",
        metavar="<name>",
    )
    model_load_thread_count: int = opt(
        4, "Number of models loaded concurrently.", "Model Repository"
    )
    model_load_retry_count: int = opt(
        0, "Number of times a failed model load is retried.", "Model Repository"
    )

    # --- HTTP ---------------------------------------------------------------------------
    allow_http: bool = opt(True, "Serve the HTTP/REST endpoints.", "HTTP")
    http_address: str = opt("0.0.0.0", "Address the HTTP server binds to.", "HTTP")
    http_port: int = opt(8000, "Port of the HTTP server.", "HTTP")
    reuse_http_port: bool = opt(
        False,
        "Bind the HTTP port with SO_REUSEPORT, so several servers (serving the same models) "
        "can share it.",
        "HTTP",
    )
    http_max_input_size: int = opt(
        64 * 2**20,
        "Largest HTTP request body accepted, in bytes; larger requests are rejected.",
        "HTTP",
        int_bits=64,
    )

    # --- OpenAI (docs/openai.md) ---------------------------------------------------------
    openai_port: int = opt(
        -1, "Port of the OpenAI-compatible API, on --http-address (-1: off, 0: any).", "OpenAI"
    )

    # --- GRPC ---------------------------------------------------------------------------
    allow_grpc: bool = opt(True, "Serve the gRPC endpoints.", "GRPC")
    grpc_address: str = opt("0.0.0.0", "Address the gRPC server binds to.", "GRPC")
    grpc_port: int = opt(8001, "Port of the gRPC server.", "GRPC")
    reuse_grpc_port: bool = opt(
        False,
        "Bind the gRPC port with SO_REUSEPORT, so several servers (serving the same models) "
        "can share it.",
        "GRPC",
    )
    grpc_implementation: str = opt(
        "native",
        "Which gRPC transport serves the endpoint: native (tritium's own HTTP/2 server) or "
        "grpcio (the grpcio library's server). Both serve the same methods.",
        "GRPC",
        choices=checks.GRPC_IMPLEMENTATIONS,
        fold_case=True,
    )
    grpc_use_ssl: bool = opt(False, "Serve gRPC over TLS.", "GRPC")
    grpc_use_ssl_mutual: bool = opt(
        False,
        "Serve gRPC over mutually authenticated TLS (clients must present a certificate "
        "signed by --grpc-root-cert). Implies --grpc-use-ssl.",
        "GRPC",
    )
    grpc_server_cert: str = opt(
        "", "PEM file holding the server certificate (for TLS).", "GRPC", metavar="<path>"
    )
    grpc_server_key: str = opt(
        "", "PEM file holding the server private key (for TLS).", "GRPC", metavar="<path>"
    )
    grpc_root_cert: str = opt(
        "",
        "PEM file holding the root certificate that client certificates must chain to "
        "(for mutual TLS).",
        "GRPC",
        metavar="<path>",
    )
    grpc_infer_response_compression_level: str = opt(
        "none",
        "Compression applied to inference responses: none, low, medium or high.",
        "GRPC",
        choices=checks.GRPC_COMPRESSION_LEVELS,
        fold_case=True,
    )
    grpc_keepalive_time: int = opt(
        7_200_000, "Milliseconds between keepalive pings sent on a connection.", "GRPC"
    )
    grpc_keepalive_timeout: int = opt(
        20_000,
        "Milliseconds to wait for a keepalive ping acknowledgement before closing the connection.",
        "GRPC",
    )
    grpc_keepalive_permit_without_calls: bool = opt(
        False, "Allow keepalive pings on connections with no call in flight.", "GRPC"
    )
    grpc_http2_max_pings_without_data: int = opt(
        2,
        "Most pings sent while there is no data or header frame to send (0: no limit).",
        "GRPC",
    )
    grpc_http2_min_recv_ping_interval_without_data: int = opt(
        300_000,
        "Minimum milliseconds expected between two pings received while no data is sent; "
        "a ping arriving sooner counts as a ping strike.",
        "GRPC",
    )
    grpc_http2_max_ping_strikes: int = opt(
        2,
        "Ping strikes tolerated before the connection is closed with GOAWAY (0: no limit).",
        "GRPC",
    )
    grpc_max_connection_age: int | None = opt(
        None,
        "Milliseconds a connection may live before it is gracefully closed (unset: forever).",
        "GRPC",
    )
    grpc_max_connection_age_grace: int | None = opt(
        None,
        "Milliseconds granted to calls still running on a connection closed for its age "
        "(unset: no limit).",
        "GRPC",
    )

    # --- Shared memory ------------------------------------------------------------------
    allow_client_shm: bool = opt(
        True,
        "Let clients register system shared-memory regions (the shared-memory extension). "
        "On by default, as in Triton, so tritonclient's shm utilities and perf_analyzer "
        "--shared-memory=system work. SECURITY: a client may then register any /dev/shm "
        "object the server's user can open, read it back through inference and write into "
        "it through outputs. Safe setting where untrusted clients can reach the server: "
        "--client-shm-key-prefix=triton_client_ (or this flag =false). See "
        "docs/deployment.md, 'Security'.",
        "Shared memory",
    )

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
        (), "Response cache of models with response_cache { enable: true }.", "Cache",
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

    # --- Connection limits and restricted APIs ------------------------------------------
    http_keep_alive_timeout_secs: int = opt(
        75,
        "Seconds an HTTP connection may stay idle between requests before it is closed (0: never).",
        "HTTP",
    )
    http_header_timeout_secs: int = opt(
        30,
        "Seconds a client has to send a whole HTTP request head, however slowly its bytes "
        "arrive; answered 408 and closed after that (0: no limit).",
        "HTTP",
    )
    http_body_timeout_secs: int = opt(
        60,
        "Seconds an HTTP request body may go without receiving a byte; answered 408 and "
        "closed after that (0: no limit).",
        "HTTP",
    )
    http_restricted_api: tuple[str, ...] = opt(
        (),
        "Restrict API groups, as <group>[,<group>...]:<key>=<value>: requests to them must "
        "carry header <key> with value <value>, else 403. Groups: health, metadata, "
        "inference, shared-memory, model-config, model-repository, statistics, trace, logging.",
        "HTTP",
        secret=True,
        metavar="<groups>:<key>=<value>",
    )
    grpc_idle_timeout_secs: int = opt(
        300,
        "Seconds a gRPC connection may stay open with no call in flight before it is "
        "closed with GOAWAY; clients reconnect transparently (0: never).",
        "GRPC",
    )
    grpc_restricted_protocol: tuple[str, ...] = opt(
        (),
        "Restrict gRPC method groups, as <group>[,<group>...]:<key>=<value>: calls to them "
        "must carry metadata triton-grpc-protocol-<key> with value <value>, else "
        "UNAVAILABLE. Groups as for --http-restricted-api.",
        "GRPC",
        secret=True,
        metavar="<groups>:<key>=<value>",
    )

    client_shm_max_regions: int = opt(
        4096,
        "Most system shared-memory regions clients may have registered at once; one more "
        "is refused with 400.",
        "Shared memory",
    )
    client_shm_max_bytes: int = opt(
        64 * 2**30,
        "Most bytes of system shared memory clients may have registered at once, all "
        "regions together; a registration past it is refused with 400.",
        "Shared memory",
        int_bits=64,
    )
    client_shm_key_prefix: str = opt(
        "",
        "Accept only shared-memory keys starting with this prefix (e.g. 'triton_client_'). "
        "Empty (Triton's behaviour): any object the server may open can be registered.",
        "Shared memory",
        metavar="<prefix>",
    )

    @property
    def http_restrictions(self) -> RestrictedApis:
        return checks.http_restrictions(self.http_restricted_api)

    @property
    def grpc_restrictions(self) -> RestrictedApis:
        return checks.grpc_restrictions(self.grpc_restricted_protocol)

    @property
    def auto_complete_config(self) -> bool:
        """Whether missing model configuration may be derived (Triton's default: yes)."""
        return not self.disable_auto_complete_config

    def __post_init__(self) -> None:
        # Frozen for its users: the coerced values are set once, here, then checked.
        for name, value in checks.normalized(vars(self)).items():
            object.__setattr__(self, name, value)
        checks.check(vars(self))
