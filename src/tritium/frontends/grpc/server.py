"""Starting and stopping the grpc.aio gRPC endpoint (the reference transport).

:class:`GrpcOptions` is applied as Triton applies its flags: TLS through
``grpc.ssl_server_credentials`` (mutual TLS requires and verifies client certificates),
keepalive and HTTP/2 ping policy as channel arguments, message size limits of
2**31 - 1 bytes both ways, and ``--grpc-infer-response-compression-level`` on the
responses of ``ModelInfer`` and ``ModelStreamInfer`` only. The methods themselves,
``grpc.health.v1.Health/Check`` included, come from ``calls.METHODS`` via ``servicer``.
"""

from __future__ import annotations

import grpc

from tritium.frontends.grpc.open_streams import OpenStreams
from tritium.frontends.grpc.options import GrpcOptions, KeepaliveOptions, TlsFiles
from tritium.frontends.grpc.servicer import add_methods_to_server
from tritium.service.api import ServiceApi

# Triton sets a grpc compression *level* on inference calls and grpc core turns it into
# an algorithm the client accepts: LOW picks gzip, MED and HIGH pick deflate (for the
# usual client, which accepts both). grpcio's Python API takes algorithms, so the same
# choice is made here.
_COMPRESSION: dict[str, grpc.Compression] = {
    "none": grpc.Compression.NoCompression,
    "low": grpc.Compression.Gzip,
    "medium": grpc.Compression.Deflate,
    "high": grpc.Compression.Deflate,
}


class GrpcServer:
    """A running gRPC endpoint."""

    def __init__(
        self, server: grpc.aio.Server, port: int, streams: OpenStreams | None = None
    ) -> None:
        self._server = server
        self._port = port
        self._streams = streams if streams is not None else OpenStreams()

    @property
    def port(self) -> int:
        """The bound port (the real one when started with port 0)."""
        return self._port

    @property
    def in_flight(self) -> int:
        """ModelStreamInfer calls still open (grpc.aio does not count its unary calls)."""
        return len(self._streams)

    async def stop(self, grace: float) -> None:
        """Stop accepting (GOAWAY), end idle streams at once, and let in-flight calls
        finish for up to ``grace`` seconds."""
        self._streams.end_all()
        await self._server.stop(grace)


def _keepalive_args(keepalive: KeepaliveOptions) -> list[tuple[str, int]]:
    args = [
        ("grpc.keepalive_time_ms", keepalive.time_ms),
        ("grpc.keepalive_timeout_ms", keepalive.timeout_ms),
        ("grpc.keepalive_permit_without_calls", int(keepalive.permit_without_calls)),
        ("grpc.http2.max_pings_without_data", keepalive.max_pings_without_data),
        (
            "grpc.http2.min_recv_ping_interval_without_data_ms",
            keepalive.min_recv_ping_interval_without_data_ms,
        ),
        ("grpc.http2.max_ping_strikes", keepalive.max_ping_strikes),
    ]
    # Triton leaves grpc's own (unlimited) defaults in place when these are unset or 0.
    if keepalive.max_connection_age_ms:
        args.append(("grpc.max_connection_age_ms", keepalive.max_connection_age_ms))
    if keepalive.max_connection_age_grace_ms:
        args.append(("grpc.max_connection_age_grace_ms", keepalive.max_connection_age_grace_ms))
    return args


def _channel_options(options: GrpcOptions) -> list[tuple[str, int]]:
    """The grpc channel arguments ``options`` stand for."""
    return [
        ("grpc.max_send_message_length", options.max_message_length),
        ("grpc.max_receive_message_length", options.max_message_length),
        ("grpc.so_reuseport", int(options.reuse_port)),
        *_keepalive_args(options.keepalive),
        *(
            [("grpc.max_connection_idle_ms", int(options.idle_timeout_s * 1000))]
            if options.idle_timeout_s > 0
            else []
        ),
    ]


def _read_pem(path: str, flag: str) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as exc:
        reason = exc.strerror or str(exc)
        raise OSError(f"cannot read {flag} file '{path}': {reason}") from None


def _server_credentials(tls: TlsFiles) -> grpc.ServerCredentials:
    """TLS credentials from PEM files; OSError naming the file when one is unreadable."""
    key = _read_pem(tls.server_key, "--grpc-server-key")
    cert = _read_pem(tls.server_cert, "--grpc-server-cert")
    root = _read_pem(tls.root_cert, "--grpc-root-cert") if tls.root_cert else None
    if tls.mutual and root is None:
        raise ValueError("mutual TLS needs a root certificate (--grpc-root-cert)")
    return grpc.ssl_server_credentials(
        [(key, cert)], root_certificates=root, require_client_auth=tls.mutual
    )


def _compression(options: GrpcOptions) -> grpc.Compression | None:
    try:
        compression = _COMPRESSION[options.response_compression]
    except KeyError:
        raise ValueError(
            f"unknown response compression level {options.response_compression!r}"
        ) from None
    return None if compression is grpc.Compression.NoCompression else compression


async def start_grpc_server(service: ServiceApi, options: GrpcOptions) -> GrpcServer:
    """Serve Triton's ``GRPCInferenceService`` for ``service`` as ``options`` say."""
    host, port = options.host, options.port
    # Read certificates before anything binds, so a bad path fails start-up cleanly.
    credentials = _server_credentials(options.tls) if options.tls is not None else None
    compression = _compression(options)
    server = grpc.aio.server(options=_channel_options(options))
    streams = OpenStreams()
    add_methods_to_server(server, service, compression, options.restricted, streams)
    address = f"{host}:{port}"
    try:
        if credentials is None:
            bound = server.add_insecure_port(address)
        else:
            bound = server.add_secure_port(address, credentials)
    except RuntimeError as exc:
        raise OSError(f"cannot bind the gRPC endpoint to {address}: {exc}") from None
    if bound == 0:
        raise OSError(f"cannot bind the gRPC endpoint to {address}")
    await server.start()
    return GrpcServer(server, bound, streams)
