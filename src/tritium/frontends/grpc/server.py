"""Starting and stopping the grpc.aio gRPC endpoint (the reference transport).

Message size limits are Triton's (2**31 - 1 bytes both ways). ``grpc.health.v1`` is
served when the ``grpcio-health-checking`` package is installed.
"""

from __future__ import annotations

import logging

import grpc
from tritonclient.grpc import service_pb2_grpc

from tritium.frontends.grpc.options import GrpcOptions
from tritium.frontends.grpc.servicer import InferenceServicer
from tritium.service import Service

logger = logging.getLogger("tritium.frontends.grpc")


class GrpcServer:
    """A running gRPC endpoint."""

    def __init__(self, server: grpc.aio.Server, port: int) -> None:
        self._server = server
        self._port = port

    @property
    def port(self) -> int:
        """The bound port (the real one when started with port 0)."""
        return self._port

    async def stop(self, grace: float) -> None:
        """Stop accepting; let in-flight calls finish for up to ``grace`` seconds."""
        await self._server.stop(grace)


def _add_health(server: grpc.aio.Server, service: Service) -> bool:
    try:
        from grpc_health.v1 import health_pb2, health_pb2_grpc
    except ImportError:
        return False

    class _Health(health_pb2_grpc.HealthServicer):
        async def Check(self, request, context):  # noqa: ANN001, ANN202, N802
            serving = service.ready()
            status = health_pb2.HealthCheckResponse
            return status(status=status.SERVING if serving else status.NOT_SERVING)

    health_pb2_grpc.add_HealthServicer_to_server(_Health(), server)
    return True


def _channel_options(options: GrpcOptions) -> list[tuple[str, int]]:
    return [
        ("grpc.max_send_message_length", options.max_message_length),
        ("grpc.max_receive_message_length", options.max_message_length),
        ("grpc.so_reuseport", int(options.reuse_port)),
    ]


async def start_grpc_server(service: Service, options: GrpcOptions) -> GrpcServer:
    """Serve Triton's ``GRPCInferenceService`` for ``service`` as ``options`` say."""
    host, port = options.host, options.port
    server = grpc.aio.server(options=_channel_options(options))
    service_pb2_grpc.add_GRPCInferenceServiceServicer_to_server(InferenceServicer(service), server)
    if not _add_health(server, service):
        logger.debug("grpc_health is not installed: grpc.health.v1.Health is not served")
    bound = server.add_insecure_port(f"{host}:{port}")
    if bound == 0:
        raise OSError(f"cannot bind the gRPC endpoint to {host}:{port}")
    await server.start()
    return GrpcServer(server, bound)
