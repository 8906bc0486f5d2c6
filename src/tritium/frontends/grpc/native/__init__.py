"""The native gRPC transport: HTTP/2 and gRPC framing on the event loop, no grpcio.

``frames`` (HTTP/2 frame bytes) and ``connection`` (the HTTP/2 state machine, with
``sending`` and ``control_frames`` beneath it) are sans-IO; ``grpc_wire`` holds gRPC's
message framing, compression, deadlines and status trailers; ``call_opening`` checks a new
stream's headers and ``call`` runs one call over ``frontends.grpc.calls`` (with
``call_state`` and ``stream_replies`` beneath it), needing of its connection only what
``call_host`` declares; ``server`` is the asyncio glue.
"""

from tritium.frontends.grpc.native.connection import H2Connection, ProtocolFailure, Stream
from tritium.frontends.grpc.native.server import (
    MAX_CONCURRENT_STREAMS,
    NativeGrpcServer,
    start_native_grpc_server,
    tls_context,
)

__all__ = [
    "MAX_CONCURRENT_STREAMS",
    "H2Connection",
    "NativeGrpcServer",
    "ProtocolFailure",
    "Stream",
    "start_native_grpc_server",
    "tls_context",
]
