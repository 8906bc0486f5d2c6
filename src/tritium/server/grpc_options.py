"""The gRPC endpoint's options (``GrpcOptions``) from the ``tritium serve`` settings."""

from __future__ import annotations

from typing import TYPE_CHECKING

from tritium.server.settings import Settings

if TYPE_CHECKING:  # the frontends are imported when they start, not at import time
    from tritium.frontends.grpc import GrpcOptions


def grpc_options(s: Settings) -> GrpcOptions:
    from tritium.frontends.grpc import GrpcOptions, KeepaliveOptions, TlsFiles

    tls = None
    if s.grpc_use_ssl:
        tls = TlsFiles(
            s.grpc_server_cert, s.grpc_server_key, s.grpc_root_cert, s.grpc_use_ssl_mutual
        )
    keepalive = KeepaliveOptions(
        time_ms=s.grpc_keepalive_time,
        timeout_ms=s.grpc_keepalive_timeout,
        permit_without_calls=s.grpc_keepalive_permit_without_calls,
        max_pings_without_data=s.grpc_http2_max_pings_without_data,
        min_recv_ping_interval_without_data_ms=s.grpc_http2_min_recv_ping_interval_without_data,
        max_ping_strikes=s.grpc_http2_max_ping_strikes,
        max_connection_age_ms=s.grpc_max_connection_age,
        max_connection_age_grace_ms=s.grpc_max_connection_age_grace,
    )
    return GrpcOptions(
        host=s.grpc_address,
        port=s.grpc_port,
        reuse_port=s.reuse_grpc_port,
        tls=tls,
        response_compression=s.grpc_infer_response_compression_level,
        keepalive=keepalive,
        idle_timeout_s=s.grpc_idle_timeout_secs,
        restricted=s.grpc_restrictions,
    )
