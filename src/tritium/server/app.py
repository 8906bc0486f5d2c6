"""Composition root: settings → repository → workers → schedulers → frontends.

Start-up is ordered (models, then frontends, then readiness); shutdown is the reverse:
stop accepting, let in-flight requests finish within ``--exit-timeout-secs``, finalize every
model, and leave no child process behind.
"""

from __future__ import annotations

import asyncio
import logging
import signal
import sys
from pathlib import Path

from tritium.core.heap import settle_heap
from tritium.frontends.metrics import MetricsConfig, parse_metrics_config
from tritium.server.devices import gpu_count
from tritium.server.log_control import connect as connect_log_settings
from tritium.server.logging_setup import configure
from tritium.server.settings import Settings
from tritium.service import LoadOptions, ModelManager, Service
from tritium.service.lifecycle_settings import lifecycle_options
from tritium.service.log_settings import LogSettings
from tritium.service.poller import RepositoryPoller
from tritium.service.shared_memory import SharedMemoryRegistry, ShmLimits
from tritium.service.spin import LoneRequestSpinner
from tritium.service.trace_settings import parse_trace_config

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
            lone_poll_us=settings.busy_poll_us,
            first_response_histogram=settings.allow_metrics
            and metrics_config.histogram_latencies,
            **lifecycle_options(settings.backend_config),
        )
        self.models = ModelManager([Path(p) for p in settings.model_repository], options)
        log_settings = LogSettings(
            log_file=settings.log_file,
            info=settings.log_info,
            warning=settings.log_warning,
            error=settings.log_error,
            verbose=settings.log_verbose,
            fmt=settings.log_format,
        )
        connect_log_settings(log_settings, self.models)
        self.service = Service(
            self.models,
            server_id=settings.id,
            strict_readiness=settings.strict_readiness,
            allow_client_shm=settings.allow_client_shm,
            log_settings=log_settings,
            trace_startup=parse_trace_config(settings.trace_config),
            model_control_mode=settings.model_control_mode,
            spinner=LoneRequestSpinner(
                settings.busy_poll_us * 1000, settings.busy_poll_linger_us * 1000
            ),
            shared_memory=SharedMemoryRegistry(
                limits=ShmLimits(
                    settings.client_shm_max_regions,
                    settings.client_shm_max_bytes,
                    settings.client_shm_key_prefix.lstrip("/"),
                )
            ),
        )
        self.poller = RepositoryPoller(self.models, float(settings.repository_poll_secs))
        self.http = None
        self.grpc = None
        self.metrics = None

    async def start(self) -> bool:
        """Load models and start frontends; False when start-up must fail."""
        try:
            _check_readable_files(self.settings)
        except OSError as exc:
            log.error("%s", exc)
            return False
        mode = self.settings.model_control_mode
        only = None
        if mode == "explicit":
            names = set(self.settings.load_model)
            only = None if "*" in names else names
        await self.models.load_all(only)
        log.info("\n%s", _model_table(self.models.table()))
        failed = [r for r in self.models.table() if not r[2].startswith("READY")]
        if failed and self.settings.exit_on_error:
            log.error("failed to load all models")
            return False
        if failed and self.settings.strict_readiness:
            log.error(
                "the server will not be ready (--strict-readiness=true) until every model is: "
                "%s",
                "; ".join(self.models.not_ready_reasons()),
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

    async def _start_frontends(self) -> None:
        if self.settings.allow_grpc:
            self.grpc = await _start_grpc(self.service, self.settings)
            log.info(
                "Started GRPCInferenceService at %s:%d", self.settings.grpc_address, self.grpc.port
            )
        if self.settings.allow_http:
            from tritium.frontends.http import start_http_server
            from tritium.frontends.http.timeouts import HttpTimeouts

            s = self.settings
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
        if self.settings.allow_metrics:
            self.metrics = await _start_metrics(self.service, self.settings, self.metrics_config)
            log.info(
                "Started Metrics Service at %s:%d", self.settings.metrics_address, self.metrics.port
            )

    async def shutdown(self) -> None:
        """Drain both frontends, then finalize and stop every model, all against one
        deadline ``--exit-timeout-secs`` away (workers still busy then are stopped)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + float(self.settings.exit_timeout_secs)

        def left() -> float:
            return max(deadline - loop.time(), 0.0)

        self.service.stopping = True
        await self.poller.stop()
        drains = []
        if self.grpc is not None:
            drains.append(self.grpc.stop(left()))
        if self.http is not None:
            drains.append(self.http.shutdown(left()))
        await asyncio.gather(*drains)
        await self.models.unload_all(left())
        if self.metrics is not None:
            await self.metrics.close()
        await self.service.trace_recorder.close()
        self.service.close()


def _check_readable_files(s: Settings) -> None:
    """Fail before loading any model when a file the endpoints need cannot be read."""
    if not (s.allow_grpc and s.grpc_use_ssl):
        return
    files = [("--grpc-server-cert", s.grpc_server_cert), ("--grpc-server-key", s.grpc_server_key)]
    if s.grpc_use_ssl_mutual:
        files.append(("--grpc-root-cert", s.grpc_root_cert))
    for flag, path in files:
        try:
            with open(path, "rb"):
                pass
        except OSError as exc:
            raise OSError(f"cannot read {flag} file '{path}': {exc.strerror}") from None


def _grpc_options(s: Settings):  # noqa: ANN202 - the frontend is imported lazily
    from tritium.frontends.grpc import GrpcOptions, KeepaliveOptions, TlsFiles

    tls = None
    if s.grpc_use_ssl:
        tls = TlsFiles(
            s.grpc_server_cert, s.grpc_server_key, s.grpc_root_cert, s.grpc_use_ssl_mutual
        )
    keepalive = KeepaliveOptions(
        time_ms=s.grpc_keepalive_time,
        timeout_ms=s.grpc_keepalive_timeout,
        permit_without_calls=s.grpc_keepalive_permit_without_calls,
        max_pings_without_data=s.grpc_http2_max_pings_without_data,
        min_recv_ping_interval_without_data_ms=s.grpc_http2_min_recv_ping_interval_without_data,
        max_ping_strikes=s.grpc_http2_max_ping_strikes,
        max_connection_age_ms=s.grpc_max_connection_age,
        max_connection_age_grace_ms=s.grpc_max_connection_age_grace,
    )
    return GrpcOptions(
        host=s.grpc_address,
        port=s.grpc_port,
        reuse_port=s.reuse_grpc_port,
        tls=tls,
        response_compression=s.grpc_infer_response_compression_level,
        keepalive=keepalive,
        idle_timeout_s=s.grpc_idle_timeout_secs,
        restricted=s.grpc_restrictions,
    )


async def _start_grpc(service: Service, settings: Settings):  # noqa: ANN202
    """Start the gRPC transport ``--grpc-implementation`` names."""
    options = _grpc_options(settings)
    if settings.grpc_implementation == "native":
        from tritium.frontends.grpc.native import start_native_grpc_server

        return await start_native_grpc_server(service, options)
    from tritium.frontends.grpc import start_grpc_server

    return await start_grpc_server(service, options)


async def _start_metrics(service: Service, s: Settings, config: MetricsConfig):  # noqa: ANN202
    from tritium.frontends.http.timeouts import HttpTimeouts
    from tritium.frontends.metrics.server import MetricsOptions, start_metrics_server

    options = MetricsOptions(
        host=s.metrics_address,
        port=s.metrics_port,
        interval_ms=s.metrics_interval_ms,
        cpu_metrics=s.allow_cpu_metrics,
        gpu_metrics=s.allow_gpu_metrics,
        config=config,
        # The HTTP endpoint's connection timeouts: one set of limits for both ports.
        timeouts=HttpTimeouts(
            s.http_keep_alive_timeout_secs, s.http_header_timeout_secs, s.http_body_timeout_secs
        ),
    )
    return await start_metrics_server(service, options)


async def serve(settings: Settings) -> int:
    server = Server(settings)
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    try:
        ok = await server.start()
        if ok:
            await stop.wait()
            log.info("Received signal, shutting down")
    finally:
        try:
            await server.shutdown()
        finally:
            # Last resort when a graceful stop failed: no worker outlives the server.
            server.models.kill_all()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)
    return 0 if ok else 1


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
