"""The one table from core error codes to gRPC status codes.

Numeric gRPC codes (as in ``grpc.StatusCode.X.value[0]``) so the protocol layer and a
native transport need no grpcio import; the grpc.aio transport turns them into
``grpc.StatusCode`` members. The table is Triton's ``CodeToStatus``.
"""

from __future__ import annotations

from tritium.core.errors import Code, TritiumError

# gRPC status codes (https://grpc.github.io/grpc/core/md_doc_statuscodes.html)
OK = 0
CANCELLED = 1
UNKNOWN = 2
INVALID_ARGUMENT = 3
NOT_FOUND = 5
ALREADY_EXISTS = 6
UNIMPLEMENTED = 12
INTERNAL = 13
UNAVAILABLE = 14

GRPC_STATUS: dict[Code, int] = {
    Code.INVALID_ARG: INVALID_ARGUMENT,
    Code.NOT_FOUND: NOT_FOUND,
    Code.UNAVAILABLE: UNAVAILABLE,
    Code.INTERNAL: INTERNAL,
    Code.UNSUPPORTED: UNIMPLEMENTED,
    Code.ALREADY_EXISTS: ALREADY_EXISTS,
    Code.CANCELLED: CANCELLED,
    Code.UNKNOWN: UNKNOWN,
}


def grpc_status_for(error: TritiumError) -> int:
    """The numeric gRPC status for ``error`` (INTERNAL for anything unmapped)."""
    return GRPC_STATUS.get(error.code, INTERNAL)
