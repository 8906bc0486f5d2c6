"""Starting and stopping the HTTP/REST endpoint.

``start_http_server`` listens on a given socket or on host/port and serves the KServe
v2 routes of a :class:`~tritium.service.api.ServiceApi`; more routes can be added through
``HttpServer.router`` at any time. ``shutdown`` stops accepting, lets received
requests finish (up to a timeout), then closes every connection.
"""

from __future__ import annotations

import asyncio
import logging
import socket

from tritium.frontends.http.handlers import KServeRoutes
from tritium.frontends.http.protocol import DEFAULT_MAX_PIPELINE, HttpProtocol
from tritium.frontends.http.router import Router
from tritium.frontends.http.timeouts import HttpTimeouts
from tritium.frontends.restricted import RestrictedApis
from tritium.frontends.sweep import ConnectionSweep, sweep_period
from tritium.service.api import ServiceApi

logger = logging.getLogger("tritium.frontends.http")

DEFAULT_MAX_INPUT_SIZE = 64 * 2**20


class HttpServer:
    """A running HTTP endpoint."""

    def __init__(
        self,
        server: asyncio.Server,
        router: Router,
        connections: set[HttpProtocol],
        sweep: ConnectionSweep | None = None,
        closing: list[bool] | None = None,
    ) -> None:
        self._server = server
        self._router = router
        self._connections = connections
        self._sweep = sweep
        #: Set by :meth:`close_after_responses`; read by the protocol factory.
        self._closing = closing if closing is not None else [False]

    @property
    def router(self) -> Router:
        """Add routes here: ``server.router.add("GET", "/v2/models/stats", handler)``."""
        return self._router

    @property
    def sockets(self) -> tuple[socket.socket, ...]:
        return tuple(self._server.sockets)

    @property
    def port(self) -> int:
        return self._server.sockets[0].getsockname()[1]

    @property
    def connection_count(self) -> int:
        return len(self._connections)

    def close_after_responses(self) -> None:
        """The drain window: every connection, and every new one, answers its next request
        with ``Connection: close`` and closes, so clients do not stay on this server."""
        self._closing[0] = True
        for conn in list(self._connections):
            conn.close_after_response()

    def close(self) -> None:
        """Stop accepting and close every connection now (in-flight requests are
        cancelled)."""
        self._server.close()
        if self._sweep is not None:
            self._sweep.close()
        for conn in list(self._connections):
            conn.abort()

    async def wait_closed(self) -> None:
        await self._server.wait_closed()
        pending = [conn.closed for conn in list(self._connections)]
        if pending:
            await asyncio.gather(*pending)

    async def shutdown(self, timeout: float = 30.0) -> None:
        """Stop accepting, let received requests finish for up to ``timeout`` seconds,
        then close whatever is left."""
        self._server.close()
        for conn in list(self._connections):
            conn.begin_drain()
        pending = [conn.closed for conn in list(self._connections)]
        if pending:
            _, late = await asyncio.wait(pending, timeout=timeout)
            if late:
                logger.warning("closing %d HTTP connection(s) still busy at shutdown", len(late))
        self.close()
        await self.wait_closed()


async def start_http_server(
    service: ServiceApi,
    *,
    sock: socket.socket | None = None,
    host: str = "0.0.0.0",
    port: int = 8000,
    max_input_size: int = DEFAULT_MAX_INPUT_SIZE,
    max_pipeline: int = DEFAULT_MAX_PIPELINE,
    router: Router | None = None,
    timeouts: HttpTimeouts | None = None,
    restricted: RestrictedApis | None = None,
) -> HttpServer:
    """Serve the KServe v2 HTTP API of ``service``.

    ``sock`` (already bound) takes precedence over host/port. ``max_input_size`` bounds
    a request body, after decompression, in bytes. ``router`` lets a caller pass one
    with routes already added; the v2 routes are added to it. ``timeouts`` bounds how
    long a connection may sit idle or take to send a request (defaults: HttpTimeouts()).
    ``restricted`` (``--http-restricted-api``) guards the routes of its groups.
    """
    if max_input_size <= 0:
        raise ValueError(f"max_input_size must be positive, got {max_input_size}")
    router = router if router is not None else Router()
    if restricted:
        router.restrict(restricted)
    KServeRoutes(service, max_input_size).register(router)
    return await serve_routes(
        router,
        sock=sock,
        host=host,
        port=port,
        max_input_size=max_input_size,
        max_pipeline=max_pipeline,
        timeouts=timeouts,
    )


async def serve_routes(
    router: Router,
    *,
    sock: socket.socket | None = None,
    host: str = "0.0.0.0",
    port: int = 8000,
    max_input_size: int = DEFAULT_MAX_INPUT_SIZE,
    max_pipeline: int = DEFAULT_MAX_PIPELINE,
    timeouts: HttpTimeouts | None = None,
) -> HttpServer:
    """Serve ``router``'s routes over this endpoint's HTTP/1.1 connections, with its limits
    (request head size, body size, pipelining, idle/slow-client timeouts). The metrics
    endpoint uses it too, so both endpoints refuse and time out alike."""
    loop = asyncio.get_running_loop()
    connections: set[HttpProtocol] = set()
    timeouts = timeouts if timeouts is not None else HttpTimeouts()
    closing = [False]  # see HttpServer.close_after_responses

    def factory() -> HttpProtocol:
        return HttpProtocol(
            router,
            connections,
            max_input_size=max_input_size,
            max_pipeline=max_pipeline,
            timeouts=timeouts,
            close_after_response=closing[0],
        )

    if sock is not None:
        server = await loop.create_server(factory, sock=sock, backlog=1024)
    else:
        server = await loop.create_server(factory, host=host, port=port, backlog=1024)
    period = sweep_period(timeouts.keep_alive, timeouts.header, timeouts.body)
    return HttpServer(server, router, connections, ConnectionSweep(connections, period), closing)
