"""The metrics page served over the HTTP endpoint's connection code.

The two frontends stay independent of each other; here, at the composition root, the
metrics page gets the HTTP port's connections and limits: a request head over 64 KiB is
answered 400 as on the HTTP port (it was once dropped without an answer), slow and idle
clients are timed out alike, pipelining and keep-alive work the same.
"""

from __future__ import annotations

from collections.abc import Callable

from tritium.frontends.http.messages import HttpRequest, HttpResponse
from tritium.frontends.http.router import Router
from tritium.frontends.http.server import HttpServer, serve_routes
from tritium.frontends.http.timeouts import HttpTimeouts
from tritium.frontends.metrics import MetricsConfig
from tritium.frontends.metrics.exposition import CONTENT_TYPE
from tritium.frontends.metrics.server import (
    MetricsOptions,
    MetricsServer,
    Serve,
    start_metrics_server,
)
from tritium.server.settings import Settings
from tritium.service import Service
from tritium.service.cache import ResponseStore

# A scrape has no body; a small one is read and ignored, a bigger one refused (400).
MAX_BODY = 16 * 1024
_CONTENT_TYPE = CONTENT_TYPE.encode("latin-1")


def metrics_over_http(timeouts: HttpTimeouts) -> Serve:
    """A ``Serve`` for the metrics frontend with the HTTP endpoint's ``timeouts``."""

    async def serve(render: Callable[[], bytes], options: MetricsOptions) -> HttpServer:
        def get(request: HttpRequest, params: dict[str, str]) -> HttpResponse:
            return HttpResponse(200, render(), _CONTENT_TYPE)

        def head(request: HttpRequest, params: dict[str, str]) -> HttpResponse:
            return HttpResponse(200, b"", _CONTENT_TYPE)

        router = Router()
        router.add("GET", "/metrics", get)
        router.add("HEAD", "/metrics", head)
        return await serve_routes(
            router,
            sock=options.sock,
            host=options.host,
            port=options.port,
            max_input_size=MAX_BODY,
            timeouts=timeouts,
        )

    return serve


async def start_metrics(
    service: Service, s: Settings, config: MetricsConfig, store: ResponseStore | None
) -> MetricsServer:
    """The metrics frontend on ``--metrics-port``, with the HTTP endpoint's limits."""
    options = MetricsOptions(
        host=s.metrics_address,
        port=s.metrics_port,
        interval_ms=s.metrics_interval_ms,
        cpu_metrics=s.allow_cpu_metrics,
        gpu_metrics=s.allow_gpu_metrics,
        config=config,
        response_store=store,
    )
    # The HTTP endpoint's connections and timeouts: one set of limits for both ports.
    timeouts = HttpTimeouts(
        s.http_keep_alive_timeout_secs, s.http_header_timeout_secs, s.http_body_timeout_secs
    )
    return await start_metrics_server(service, options, metrics_over_http(timeouts))
