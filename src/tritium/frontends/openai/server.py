"""Starting the OpenAI-compatible endpoint: the HTTP frontend's connection protocol,
serving only the OpenAI routes, on its own port of the same event loop.

The connections are :class:`~tritium.frontends.http.protocol.HttpProtocol`\\ s, so the
OpenAI port has the HTTP port's request limits, timeouts, pipelining, read pausing and
streamed-body handling, and it stops (drains, then closes) the same way.
"""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

from tritium.frontends.http.protocol import DEFAULT_MAX_PIPELINE, HttpProtocol
from tritium.frontends.http.router import Router
from tritium.frontends.http.server import DEFAULT_MAX_INPUT_SIZE, HttpServer
from tritium.frontends.http.timeouts import HttpTimeouts
from tritium.frontends.openai.routes import GenerationService, OpenAIRoutes
from tritium.frontends.sweep import ConnectionSweep, sweep_period

#: Triton's OpenAI frontend listens here unless told otherwise.
DEFAULT_OPENAI_PORT = 9000


class ServeSettings(Protocol):
    """The ``tritium serve`` settings the endpoint starts from (read only)."""

    @property
    def model_repository(self) -> tuple[str, ...]: ...
    @property
    def http_address(self) -> str: ...
    @property
    def openai_port(self) -> int: ...
    @property
    def http_max_input_size(self) -> int: ...
    @property
    def http_keep_alive_timeout_secs(self) -> int: ...
    @property
    def http_header_timeout_secs(self) -> int: ...
    @property
    def http_body_timeout_secs(self) -> int: ...


async def start_from_settings(service: GenerationService, s: ServeSettings) -> HttpServer:
    """``--openai-port``: on ``--http-address``, with the HTTP port's size limit and
    timeouts; chat templates looked for in the ``--model-repository`` folders."""
    return await start_openai_server(
        service,
        repositories=[Path(p) for p in s.model_repository],
        host=s.http_address,
        port=s.openai_port,
        max_input_size=s.http_max_input_size,
        timeouts=HttpTimeouts(
            s.http_keep_alive_timeout_secs, s.http_header_timeout_secs, s.http_body_timeout_secs
        ),
    )


async def start_openai_server(
    service: GenerationService,
    *,
    repositories: Sequence[Path] = (),
    sock: socket.socket | None = None,
    host: str = "0.0.0.0",
    port: int = DEFAULT_OPENAI_PORT,
    max_input_size: int = DEFAULT_MAX_INPUT_SIZE,
    timeouts: HttpTimeouts | None = None,
) -> HttpServer:
    """Serve the OpenAI API of ``service``'s text-generation models.

    ``repositories`` are the model repositories, where chat templates are looked for
    (see ``chat_template``). ``sock`` (already bound) takes precedence over host/port.
    """
    if max_input_size <= 0:
        raise ValueError(f"max_input_size must be positive, got {max_input_size}")
    loop = asyncio.get_running_loop()
    router = Router()
    OpenAIRoutes(service, repositories, created=int(time.time())).register(router)
    connections: set[HttpProtocol] = set()
    timeouts = timeouts if timeouts is not None else HttpTimeouts()

    def factory() -> HttpProtocol:
        return HttpProtocol(
            router,
            connections,
            max_input_size=max_input_size,
            max_pipeline=DEFAULT_MAX_PIPELINE,
            timeouts=timeouts,
        )

    if sock is not None:
        server = await loop.create_server(factory, sock=sock, backlog=1024)
    else:
        server = await loop.create_server(factory, host=host, port=port, backlog=1024)
    period = sweep_period(timeouts.keep_alive, timeouts.header, timeouts.body)
    return HttpServer(server, router, connections, ConnectionSweep(connections, period))
