"""The options of the endpoints: HTTP, OpenAI, gRPC and client shared memory."""

from __future__ import annotations

from dataclasses import dataclass

from tritium.server import settings_checks as checks
from tritium.server.settings_field import opt


@dataclass(frozen=True)
class EndpointSettings:
    """Endpoint options (part of ``Settings``)."""

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
