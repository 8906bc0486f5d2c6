"""Composition root: settings → repository → workers → schedulers → frontends.

:func:`build_service` wires the service layer, each piece given its collaborators through
its constructor (nothing is attached afterwards), in this order:

1. the model table (empty) and the request spinner, the shared-memory registry, the
   trace settings and recorder;
2. the submitter (the request path) over the table;
3. model code's model control (empty: see ``ModelCodeControl``, which breaks the one
   construction cycle) and the BLS endpoint over the submitter and the table;
4. the builders: the version builder (its workers call the BLS endpoint) and the ensemble
   builder (steps go through the submitter);
5. the model manager over the table, given both builders;
6. the repository API over the manager (it becomes model code's model control);
7. the ``Service`` façade over the table, the submitter and the repository API.

Start-up is ordered (models, then frontends, then readiness); shutdown is the reverse:
optionally answer not-ready while still serving (``--drain-delay-secs``), stop accepting and
close idle connections, let in-flight requests finish within ``--exit-timeout-secs``,
finalize every model, and leave no child process behind (``shutdown`` has the signals and
the countdown).
"""

from __future__ import annotations

import asyncio
import logging
import sys
from collections.abc import Awaitable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tritium.core.heap import settle_heap
from tritium.frontends.metrics import parse_metrics_config
from tritium.repository.location import repository_roots
from tritium.repository.scan import RepositoryError
from tritium.scheduling import RateLimiter
from tritium.server.devices import gpu_count
from tritium.server.grpc_options import grpc_options
from tritium.server.log_control import connect as connect_log_settings
from tritium.server.logging_setup import configure
from tritium.server.settings import Settings
from tritium.server.shutdown import Countdown, serve_until_stopped
from tritium.server.start_up_checks import binding, check_start_up
from tritium.service import LoadOptions, ModelManager, ModelTable, Service, Submitter
from tritium.service.cache import ResponseStore, new_store
from tritium.service.composition.bls import BlsEndpoint
from tritium.service.composition.ensembles import EnsembleBuilder
from tritium.service.lifecycle.builder import VersionBuilder
from tritium.service.lifecycle.poller import RepositoryPoller
from tritium.service.lifecycle.remotes import RemoteCopies
from tritium.service.lifecycle.repository_api import ModelCodeControl, RepositoryControl
from tritium.service.lifecycle.settings import lifecycle_options
from tritium.service.log_settings import LogSettings
from tritium.service.requests.spin import RequestSpinner
from tritium.service.shared_memory.registry import SharedMemoryRegistry, ShmLimits
from tritium.service.tracing.recorders import new_recorder
from tritium.service.tracing.settings import TraceSettings, parse_trace_config

if TYPE_CHECKING:  # the frontends are imported when they start, not at import time
    from tritium.frontends.grpc import GrpcServer
    from tritium.frontends.grpc.native.server import NativeGrpcServer

log = logging.getLogger("tritium.server")


def _model_table(rows: list[tuple[str, str, str]]) -> str:
    headers = ("Model", "Version", "Status")
    widths = [
        max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers)
    ]
    sep = "+" + "+".join("-" * (w + 2) for w in widths) + "+"

    def line(cells: tuple[str, ...]) -> str:
        return "|" + "|".join(f" {c:<{w}} " for c, w in zip(cells, widths)) + "|"

    return "\n".join([sep, line(headers), sep, *(line(r) for r in rows), sep])


@dataclass(frozen=True, slots=True)
class Wiring:
    """The service layer as :func:`build_service` wired it."""

    table: ModelTable
    manager: ModelManager
    submitter: Submitter
    service: Service


def build_service(
    roots: Sequence[Path],
    options: LoadOptions | None = None,
    *,
    server_id: str = "triton",
    strict_readiness: bool = True,
    allow_client_shm: bool = True,
    shared_memory: SharedMemoryRegistry | None = None,
    log_settings: LogSettings | None = None,
    trace_startup: dict[str, Any] | None = None,
    model_control_mode: str = "none",
    spinner: RequestSpinner | None = None,
    table: ModelTable | None = None,
    response_store: ResponseStore | None = None,
    rate_limiter: RateLimiter | None = None,
    remotes: RemoteCopies | None = None,
) -> Wiring:
    """Wire the service layer over the model repositories ``roots`` (see the module's
    docstring for the order). Nothing is loaded yet: call ``manager.load_all``. ``table``
    is a new, empty one unless given (the CPU benches give one serving a fake model).
    ``rate_limiter`` (--rate-limit=execution_count) is shared by every model's instances;
    ``remotes`` are the copies of the cloud repositories among ``roots``."""
    options = options if options is not None else LoadOptions()
    table = table if table is not None else ModelTable()
    # Polls the loop while client requests are in flight (off unless given: the server
    # passes its --busy-poll settings).
    spinner = spinner if spinner is not None else RequestSpinner(0, 0)
    registry = shared_memory if shared_memory is not None else SharedMemoryRegistry()
    trace_settings = TraceSettings(trace_startup, table.__contains__)
    submitter = Submitter(
        table, spinner, trace_settings, new_recorder(trace_settings), registry, allow_client_shm
    )
    model_code = ModelCodeControl()
    bls = BlsEndpoint(submitter, table, model_code)
    workers_poll = spinner.workers_poll if spinner.enabled else None
    versions = VersionBuilder(options, bls, workers_poll, response_store, rate_limiter)
    ensembles = EnsembleBuilder(submitter, table, options.gpu_count, response_store)
    manager = ModelManager(list(roots), options, table, versions, ensembles, remotes)
    repository = RepositoryControl(manager, model_control_mode, model_code)
    service = Service(
        table,
        submitter,
        repository,
        server_id=server_id,
        strict_readiness=strict_readiness,
        log_settings=log_settings,
    )
    return Wiring(table, manager, submitter, service)


class Server:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.metrics_config = metrics_config = parse_metrics_config(settings.metrics_config)
        options = LoadOptions(
            auto_complete=not settings.disable_auto_complete_config,
            model_config_name=settings.model_config_name,
            log_verbose=settings.log_verbose,
            gpu_count=gpu_count(),
            latency_summaries=settings.allow_metrics and metrics_config.summary_latencies,
            worker_poll_us=settings.busy_poll_worker_us,
            worker_spare_poll_us=settings.busy_poll_worker_spare_us,
            hinted_poll_us=settings.busy_poll_us,
            first_response_histogram=settings.allow_metrics
            and metrics_config.histogram_latencies,
            backend_config=settings.backend_config,
            **lifecycle_options(settings.backend_config),
        )
        log_settings = LogSettings(
            log_file=settings.log_file,
            info=settings.log_info,
            warning=settings.log_warning,
            error=settings.log_error,
            verbose=settings.log_verbose,
            fmt=settings.log_format,
        )
        self.response_store = new_store(settings.cache_config, settings.response_cache_byte_size)
        # Cloud repositories are served from local copies, synced at start (``start``).
        roots, remotes = repository_roots(settings.model_repository)
        self.remotes = RemoteCopies(remotes)
        wiring = build_service(
            roots,
            options,
            server_id=settings.id,
            strict_readiness=settings.strict_readiness,
            allow_client_shm=settings.allow_client_shm,
            log_settings=log_settings,
            trace_startup=parse_trace_config(settings.trace_config),
            model_control_mode=settings.model_control_mode,
            spinner=RequestSpinner(
                settings.busy_poll_us * 1000, settings.busy_poll_linger_us * 1000
            ),
            response_store=self.response_store,
            rate_limiter=RateLimiter.for_mode(settings.rate_limit, settings.rate_limit_resource),
            remotes=self.remotes,
            shared_memory=SharedMemoryRegistry(
                limits=ShmLimits(
                    settings.client_shm_max_regions,
                    settings.client_shm_max_bytes,
                    settings.client_shm_key_prefix.lstrip("/"),
                )
            ),
        )
        self.table = wiring.table
        self.models = wiring.manager
        self.service = wiring.service
        connect_log_settings(log_settings, self.table)
        self.poller = RepositoryPoller(self.models, float(settings.repository_poll_secs))
        # The running frontends (their types are imported lazily, with the frontends).
        self.http: Any = None
        self.grpc: Any = None
        self.metrics: Any = None
        self.openai: Any = None

    async def start(self) -> bool:
        """Load models and start frontends; False when start-up must fail."""
        try:
            check_start_up(self.settings)
            await self._copy_cloud_repositories()
        except (OSError, RepositoryError) as exc:
            log.error("%s", exc)
            return False
        mode = self.settings.model_control_mode
        only = None
        if mode == "explicit":
            names = set(self.settings.load_model)
            only = None if "*" in names else names
        await self.models.load_all(only)
        log.info("\n%s", _model_table(self.models.table_rows()))
        failed = [r for r in self.models.table_rows() if not r[2].startswith("READY")]
        if failed and self.settings.exit_on_error:
            log.error("failed to load all models")
            return False
        if failed and self.settings.strict_readiness:
            log.error(
                "the server will not be ready (--strict-readiness=true) until every model is: "
                "%s",
                "; ".join(self.table.not_ready_reasons()),
            )
        try:
            await self._start_frontends()
        except OSError as exc:
            # A port in use or an unreadable file: one clear line, not a traceback.
            log.error("%s", exc)
            return False
        settle_heap()
        self.service.started = True
        if mode == "poll":
            self.poller.start()
        return True

    async def _copy_cloud_repositories(self) -> None:
        """Copy every cloud repository into its local folder (RepositoryError, one line,
        when a store cannot be read: bad location, bucket or credentials, missing extra)."""
        if not self.remotes:
            return
        await self.remotes.sync()
        for remote in self.remotes.remotes:
            log.info("model repository '%s' copied to '%s'", remote.text, remote.local)

    async def _start_frontends(self) -> None:
        s = self.settings
        if self.settings.allow_grpc:
            with binding("GRPC", s.grpc_address, s.grpc_port, "--grpc-port"):
                self.grpc = await _start_grpc(self.service, self.settings)
            log.info(
                "Started GRPCInferenceService at %s:%d", self.settings.grpc_address, self.grpc.port
            )
        if self.settings.allow_http:
            from tritium.frontends.http import start_http_server
            from tritium.frontends.http.timeouts import HttpTimeouts

            with binding("HTTP", s.http_address, s.http_port, "--http-port"):
                self.http = await start_http_server(
                    self.service,
                    host=s.http_address,
                    port=s.http_port,
                    max_input_size=s.http_max_input_size,
                    timeouts=HttpTimeouts(
                        s.http_keep_alive_timeout_secs,
                        s.http_header_timeout_secs,
                        s.http_body_timeout_secs,
                    ),
                    restricted=s.http_restrictions,
                )
            log.info("Started HTTPService at %s:%d", self.settings.http_address, self.http.port)
        if self.settings.openai_port >= 0:
            from tritium.frontends.openai import start_from_settings

            with binding("OpenAI", s.http_address, s.openai_port, "--openai-port"):
                self.openai = await start_from_settings(self.service, self.settings)
            log.info("Started OpenAIService at %s:%d", self.settings.http_address, self.openai.port)
        if self.settings.allow_metrics:
            with binding("Metrics", s.metrics_address, s.metrics_port, "--metrics-port"):
                from tritium.server.metrics_http import start_metrics

                self.metrics = await start_metrics(
                    self.service, self.settings, self.metrics_config, self.response_store
                )
            log.info(
                "Started Metrics Service at %s:%d", self.settings.metrics_address, self.metrics.port
            )

    def begin_drain(self) -> None:
        """``--drain-delay-secs``: not ready, still serving; HTTP closes after each answer."""
        self.service.draining = True
        if self.http is not None:
            self.http.close_after_responses()
        if self.openai is not None:
            self.openai.close_after_responses()

    async def shutdown(self) -> None:
        """Drain both frontends, then finalize and stop every model, all against one
        deadline ``--exit-timeout-secs`` away (workers still busy then are stopped). Idle
        connections and streams close at once; the log counts down (``shutdown.Countdown``)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + float(self.settings.exit_timeout_secs)

        def left() -> float:
            return max(deadline - loop.time(), 0.0)

        self.service.stopping = True
        await self.poller.stop()
        countdown = Countdown(
            left,
            lambda: sum(1 for version in self.table.loaded() if version.busy()),
            lambda: sum(1 for _ in self.table.loaded()),
        )
        countdown.start()
        try:
            drains: list[Awaitable[Any]] = []
            if self.grpc is not None:
                drains.append(self.grpc.stop(left()))
            if self.http is not None:
                drains.append(self.http.shutdown(left()))
            if self.openai is not None:
                drains.append(self.openai.shutdown(left()))
            await asyncio.gather(*drains)
            countdown.unloading()
            await self.models.unload_all(left())
        finally:
            countdown.stop()
        if self.metrics is not None:
            await self.metrics.close()
        await self.service.trace_recorder.close()
        self.service.close()
        self.remotes.close()

    async def abort(self) -> None:
        """Stop at once (a second signal): close every connection; workers are killed next."""
        self.service.stopping = True
        if self.http is not None:
            self.http.close()
        if self.openai is not None:
            self.openai.close()
        if self.grpc is not None:
            await self.grpc.stop(0)
        if self.metrics is not None:
            await self.metrics.close()



async def _start_grpc(service: Service, settings: Settings) -> GrpcServer | NativeGrpcServer:
    """Start the gRPC transport ``--grpc-implementation`` names."""
    options = grpc_options(settings)
    if settings.grpc_implementation == "native":
        from tritium.frontends.grpc.native import start_native_grpc_server

        return await start_native_grpc_server(service, options)
    from tritium.frontends.grpc import start_grpc_server

    return await start_grpc_server(service, options)


async def serve(settings: Settings) -> int:
    """Serve until SIGINT/SIGTERM (see ``shutdown.serve_until_stopped``); the exit code."""
    return await serve_until_stopped(Server(settings), float(settings.drain_delay_secs))


def run(settings: Settings) -> int:
    """Run the server until SIGINT/SIGTERM; returns the process exit code."""
    try:
        configure(
            verbose=settings.log_verbose,
            info=settings.log_info,
            warning=settings.log_warning,
            error=settings.log_error,
            fmt=settings.log_format,
            log_file=settings.log_file,
        )
    except OSError as exc:
        path = settings.log_file
        print(f"error: cannot open --log-file '{path}': {exc.strerror}", file=sys.stderr)
        return 1
    try:
        import uvloop

        return uvloop.run(serve(settings))
    except ImportError:
        return asyncio.run(serve(settings))
    except KeyboardInterrupt:
        return 0
