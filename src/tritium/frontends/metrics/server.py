"""``GET /metrics`` on ``--metrics-address:--metrics-port``, served by the main event loop.

The page is built when it is asked for, from counters the request path already keeps: a
scrape takes no lock and waits on no instance, so it answers while every instance is
busy. CPU and memory are sampled every ``--metrics-interval-ms`` by a timer on the loop;
GPUs (through NVML, where present) at the same interval on a worker thread.
The connections are the HTTP endpoint's own (the server passes them in as ``Serve``): the
same request-head limit and answer, pipelining and keep-alive, idle and slow-client
timeouts, so a client meets the same limits on both ports.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Protocol

from tritium.core.custom_metrics import CustomMetrics
from tritium.core.custom_metrics import registry as default_registry
from tritium.frontends.metrics.collect import (
    cache_families,
    cpu_families,
    custom_families,
    first_response_family,
    gpu_families,
    model_families,
    restart_family,
    summary_families,
)
from tritium.frontends.metrics.config import MetricsConfig
from tritium.frontends.metrics.exposition import render
from tritium.frontends.metrics.gpu import GpuSampler
from tritium.frontends.metrics.system import SystemSampler
from tritium.service.api import ServiceApi
from tritium.service.cache import ResponseStore

log = logging.getLogger("tritium.metrics")

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


class Listener(Protocol):
    """A listening endpoint serving the page (the HTTP endpoint's ``HttpServer``)."""

    @property
    def port(self) -> int: ...

    def close(self) -> None: ...

    async def wait_closed(self) -> None: ...


#: Starts serving ``GET /metrics`` (the page's bytes, ``CONTENT_TYPE``) at the options'
#: address. The composition root passes the HTTP endpoint's connection code, so both ports
#: share one set of limits (request head size, slow and idle clients) without this
#: frontend depending on the other.
Serve = Callable[[Callable[[], bytes], MetricsOptions], Awaitable[Listener]]


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
        families += restart_family(versions)
        return render(families)


class MetricsServer:
    def __init__(self, page: MetricsPage, options: MetricsOptions, serve: Serve) -> None:
        self.page = page
        self._options = options
        self._serve = serve
        self._listener: Listener | None = None
        self._poller: asyncio.Task[None] | None = None
        self.port = 0

    async def start(self) -> None:
        opts = self._options
        self._listener = await self._serve(self.page.render, opts)
        self.port = self._listener.port
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

    async def close(self) -> None:
        if self._poller is not None:
            self._poller.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._poller
        await asyncio.get_running_loop().run_in_executor(None, self.page.gpu.close)
        if self._listener is not None:
            self._listener.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._listener.wait_closed(), 2.0)


async def start_metrics_server(
    service: ServiceApi, options: MetricsOptions, serve: Serve
) -> MetricsServer:
    server = MetricsServer(MetricsPage(service, options), options, serve)
    await server.start()
    return server
