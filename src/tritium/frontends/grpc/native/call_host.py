"""What a native gRPC call needs of the connection it runs on, declared here so that the
call modules never import the server module that hosts them."""

from __future__ import annotations

import asyncio
from typing import Any, Protocol

from tritium.frontends.grpc.infer_plans import RequestPlans
from tritium.frontends.grpc.native.connection import H2Connection
from tritium.frontends.restricted import Restriction
from tritium.service.api import ServiceApi


class CallHost(Protocol):
    """One client connection as its calls see it (``server.GrpcProtocol`` is one)."""

    conn: H2Connection
    service: ServiceApi
    loop: asyncio.AbstractEventLoop
    #: Decoded ModelInfer headers, shared by all connections.
    plans: RequestPlans
    max_message_length: int
    response_compression: str
    compression_level: int
    #: id(header list) → (header list, checked headers); see ``call_opening.open_call``.
    checked_headers: dict[int, tuple[Any, Any]]
    #: :path → the header its calls must carry (only restricted methods are here).
    restricted_paths: dict[str, Restriction]
    #: --log-verbose when the connection opened: each call's method and status is logged.
    debug: bool

    def schedule_flush(self) -> None:
        """Write what the connection has queued soon, in one write with other answers."""
        ...
