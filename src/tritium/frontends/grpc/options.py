"""What a gRPC transport is told at start-up: address, TLS, keepalive, compression.

Both transports (the native HTTP/2 server and the grpcio reference) take the same
:class:`GrpcOptions`, so a deployment's flags mean the same thing whichever serves.
Durations are in milliseconds, as Triton's flags give them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tritium.frontends.restricted import RestrictedApis

#: Triton's message size limit, both directions (INT32_MAX bytes).
MAX_MESSAGE_LENGTH = 2**31 - 1


@dataclass(frozen=True)
class TlsFiles:
    """PEM files for TLS; ``root_cert`` is set when clients must present certificates."""

    server_cert: str
    server_key: str
    root_cert: str = ""
    mutual: bool = False


@dataclass(frozen=True)
class KeepaliveOptions:
    """HTTP/2 keepalive and ping policy (Triton's ``--grpc-keepalive-*`` family)."""

    time_ms: int = 7_200_000
    timeout_ms: int = 20_000
    permit_without_calls: bool = False
    max_pings_without_data: int = 2
    min_recv_ping_interval_without_data_ms: int = 300_000
    max_ping_strikes: int = 2
    max_connection_age_ms: int | None = None
    max_connection_age_grace_ms: int | None = None


@dataclass(frozen=True)
class GrpcOptions:
    """Everything a gRPC transport needs to serve; defaults are Triton's."""

    host: str = "0.0.0.0"
    port: int = 8001
    reuse_port: bool = False
    tls: TlsFiles | None = None
    #: "none", "low", "medium" or "high": compression of inference responses.
    response_compression: str = "none"
    keepalive: KeepaliveOptions = KeepaliveOptions()
    max_message_length: int = MAX_MESSAGE_LENGTH
    #: Seconds a connection with no open stream stays open before GOAWAY (0: forever).
    idle_timeout_s: float = 0.0
    #: ``--grpc-restricted-protocol``: methods of these groups require a header.
    restricted: RestrictedApis = field(default_factory=RestrictedApis)
