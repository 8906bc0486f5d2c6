"""``GET /metrics`` on ``--metrics-address:--metrics-port``, served by the main event loop.

The page is built when it is asked for, from counters the request path already keeps: a
scrape takes no lock and waits on no instance, so it answers while every instance is
busy. CPU and memory are sampled every ``--metrics-interval-ms`` by a timer on the loop;
GPUs (through NVML, where present) at the same interval on a worker thread.
The HTTP side is deliberately small: GET/HEAD, keep-alive, bounded request heads and an
idle timeout.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
from dataclasses import dataclass, field

from tritium.core.custom_metrics import CustomMetrics
from tritium.core.custom_metrics import registry as default_registry
from tritium.frontends.metrics.collect import (
    cache_families,
    cpu_families,
    custom_families,
    first_response_family,
    gpu_families,
    model_families,
    summary_families,
)
from tritium.frontends.metrics.config import MetricsConfig
from tritium.frontends.metrics.exposition import CONTENT_TYPE, render
from tritium.frontends.metrics.gpu import GpuSampler
from tritium.frontends.metrics.system import SystemSampler
from tritium.service.api import ServiceApi
from tritium.service.cache import ResponseStore

log = logging.getLogger("tritium.metrics")

MAX_HEAD = 16 * 1024
IDLE_TIMEOUT_S = 60.0
MIN_INTERVAL_MS = 10


@dataclass(frozen=True, slots=True)
class MetricsOptions:
    host: str = "0.0.0.0"
    port: int = 8002
    interval_ms: int = 2000
    cpu_metrics: bool = True
    gpu_metrics: bool = True
    config: MetricsConfig = field(default_factory=MetricsConfig)
    sock: socket.socket | None = None  # a pre-bound socket (tests); host/port then unused
    #: The server's response cache, for the nv_cache_* gauges (None: no cache).
    response_store: ResponseStore | None = None


class MetricsPage:
    """Builds the page; sans-IO apart from reading the service's live objects."""

    def __init__(
        self,
        service: ServiceApi,
        options: MetricsOptions,
        custom: CustomMetrics = default_registry,
        sampler: SystemSampler | None = None,
        gpu: GpuSampler | None = None,
    ) -> None:
        self._service = service
        self._options = options
        self._custom = custom
        self.sampler = sampler if sampler is not None else SystemSampler()
        self.gpu = gpu if gpu is not None else GpuSampler()

    def render(self) -> bytes:
        config = self._options.config
        versions = list(self._service.table.loaded())
        families = model_families(versions, config)
        families += cache_families(self._options.response_store)
        families += custom_families(self._custom)
        families += gpu_families(self.gpu.latest)  # empty unless GPUs were found
        if self._options.cpu_metrics:
            families += cpu_families(self.sampler.latest)
        families += summary_families(versions, config)
        families += first_response_family(versions, config)
        return render(families)


class MetricsServer:
    def __init__(self, page: MetricsPage, options: MetricsOptions) -> None:
        self.page = page
        self._options = options
        self._server: asyncio.AbstractServer | None = None
        self._poller: asyncio.Task[None] | None = None
        self._connections: set[asyncio.Task[None]] = set()
        self.port = 0

    async def start(self) -> None:
        opts = self._options
        if opts.sock is not None:
            self._server = await asyncio.start_server(self._connection, sock=opts.sock)
        else:
            self._server = await asyncio.start_server(
                self._connection, opts.host, opts.port, reuse_address=True
            )
        self.port = self._server.sockets[0].getsockname()[1]
        loop = asyncio.get_running_loop()
        gpus = opts.gpu_metrics and await loop.run_in_executor(None, self.page.gpu.start)
        if gpus:
            await loop.run_in_executor(None, self.page.gpu.sample)
        if opts.cpu_metrics:
            self.page.sampler.sample()
        if opts.cpu_metrics or gpus:
            self._poller = asyncio.ensure_future(self._poll(opts.cpu_metrics, gpus))

    async def _poll(self, cpu: bool, gpus: bool) -> None:
        # At least 10 ms: a zero interval must not turn the poll into a busy loop.
        interval = max(self._options.interval_ms, MIN_INTERVAL_MS) / 1000
        loop = asyncio.get_running_loop()
        while True:
            await asyncio.sleep(interval)
            if cpu:
                self.page.sampler.sample()
            if gpus:
                # NVML may block for milliseconds: read it on a worker thread.
                await loop.run_in_executor(None, self.page.gpu.sample)

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        if task is not None:
            self._connections.add(task)
        try:
            while await self._one_request(reader, writer):
                pass
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, TimeoutError):
            pass
        except (ConnectionError, asyncio.CancelledError):
            pass
        finally:
            if task is not None:
                self._connections.discard(task)
            writer.close()

    async def _one_request(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        """Answer one request; False when the connection should close."""
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), IDLE_TIMEOUT_S)
        if len(head) > MAX_HEAD:
            return False
        lines = head.decode("latin-1").split("\r\n")
        parts = lines[0].split(" ")
        if len(parts) != 3:
            writer.write(_answer(400, b"Bad Request", "text/plain", close=True))
            return False
        method, target, version = parts
        headers = {}
        for line in lines[1:]:
            name, _, value = line.partition(":")
            if name:
                headers[name.strip().lower()] = value.strip()
        try:
            length = int(headers.get("content-length", "0") or 0)
        except ValueError:
            length = -1
        if not 0 <= length <= MAX_HEAD:
            writer.write(_answer(400, b"Bad Request", "text/plain", close=True))
            return False
        if length:
            await reader.readexactly(length)
        close = headers.get("connection", "").lower() == "close" or version == "HTTP/1.0"
        path = target.split("?", 1)[0]
        if path != "/metrics":
            writer.write(_answer(404, b"Not Found", "text/plain", close))
        elif method not in ("GET", "HEAD"):
            writer.write(_answer(405, b"Method Not Allowed", "text/plain", close))
        else:
            body = self.page.render()
            writer.write(_answer(200, body, CONTENT_TYPE, close, head_only=method == "HEAD"))
        await writer.drain()
        return not close

    async def close(self) -> None:
        if self._poller is not None:
            self._poller.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._poller
        await asyncio.get_running_loop().run_in_executor(None, self.page.gpu.close)
        if self._server is not None:
            self._server.close()
            for task in list(self._connections):
                task.cancel()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), 2.0)


_REASONS = {200: "OK", 400: "Bad Request", 404: "Not Found", 405: "Method Not Allowed"}


def _answer(
    status: int, body: bytes, content_type: str, close: bool, head_only: bool = False
) -> bytes:
    head = (
        f"HTTP/1.1 {status} {_REASONS[status]}\r\n"
        f"Content-Type: {content_type}\r\n"
        f"Content-Length: {len(body)}\r\n"
        + ("Connection: close\r\n" if close else "")
        + "\r\n"
    )
    return head.encode() + (b"" if head_only else body)


async def start_metrics_server(service: ServiceApi, options: MetricsOptions) -> MetricsServer:
    server = MetricsServer(MetricsPage(service, options), options)
    await server.start()
    return server
