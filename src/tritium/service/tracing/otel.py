"""``--trace-config mode=opentelemetry``: sampled requests exported as OpenTelemetry spans.

Each trace has Triton's three spans (all of kind SERVER): ``InferRequest`` (the root, from
request start to request end), a span named after the model (attributes
``triton.model_name``, ``triton.model_version``, ``triton.trace_id``,
``triton.trace_parent_id`` and, when the client gave one, ``triton.request_id``; events
REQUEST_START, QUEUE_START, REQUEST_END) and its child ``compute`` (events
COMPUTE_START, COMPUTE_INPUT_END, COMPUTE_OUTPUT_START, COMPUTE_END; absent when the
request never reached ``execute``). Timestamps are the trace file's, moved from the
monotonic clock onto the wall clock once, at start-up, as Triton does.

The event loop only queues a sampled request's timestamps (bounded); a thread of the
recorder builds the spans and ends them into the SDK's batch span processor, whose own
thread exports over OTLP/HTTP, so nothing on the loop waits on the SDK or the network.
This module imports OpenTelemetry; it is loaded only in this mode.
"""

from __future__ import annotations

import asyncio
import logging
import queue
import threading
import time

from opentelemetry import trace as otel_trace
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from tritium import __version__
from tritium.core import InferRequest
from tritium.core.clock import now_ns
from tritium.service.model.interface import ServedVersion
from tritium.service.tracing.otel_options import DEFAULT_SERVICE_NAME, OtelOptions
from tritium.service.tracing.recorder import Recorder, Window, timestamps

log = logging.getLogger("tritium.trace")

TRACER_NAME = "triton-server"
ROOT_SPAN = "InferRequest"
COMPUTE_SPAN = "compute"
_MODEL_EVENTS = ("REQUEST_START", "QUEUE_START")
_COMPUTE_EVENTS = ("COMPUTE_START", "COMPUTE_INPUT_END", "COMPUTE_OUTPUT_START", "COMPUTE_END")
CLOSE_TIMEOUT_S = 5.0
# Traces taken but not yet turned into spans; past this, new ones are dropped.
MAX_PENDING = 10_000

_Stamps = list[tuple[str, int]]
_W3C = TraceContextTextMapPropagator()
_Trace = tuple[str, int, str, int, _Stamps, dict[str, str] | None]


class OtelRecorder(Recorder):
    """Same interface as ``TraceRecorder``: ``finish`` per sampled request, ``close``.

    ``finish`` (on the event loop) only takes the request's timestamps and queues them;
    a thread of this recorder builds the spans (the SDK's work, about 100 µs a trace) and
    hands them to the batch span processor, whose own thread exports them.
    """

    def __init__(self, options: OtelOptions) -> None:
        attributes = {"service.name": DEFAULT_SERVICE_NAME, **dict(options.resource)}
        # Resource.create also merges OTEL_RESOURCE_ATTRIBUTES; given values win. The
        # provider is shut down by ``close``, not by the SDK at exit (which could block).
        self._provider = TracerProvider(
            resource=Resource.create(attributes), shutdown_on_exit=False
        )
        self._provider.add_span_processor(
            BatchSpanProcessor(
                OTLPSpanExporter(endpoint=options.url),
                max_queue_size=options.bsp_setting("bsp_max_queue_size"),
                schedule_delay_millis=options.bsp_setting("bsp_schedule_delay"),
                max_export_batch_size=options.bsp_setting("bsp_max_export_batch_size"),
            )
        )
        self._tracer = self._provider.get_tracer(TRACER_NAME, __version__)
        # monotonic ns + offset = wall-clock ns
        self._offset = time.time_ns() - now_ns()
        self._next_id = 1
        self._pending: queue.Queue[_Trace | None] = queue.Queue(MAX_PENDING)
        self._dropped = False
        self._builder = threading.Thread(target=self._build_all, name="tritium-otel", daemon=True)
        self._builder.start()

    def record(
        self, loaded: ServedVersion, request: InferRequest, end: int, window: Window
    ) -> None:
        """Queue the request's timestamps for the builder."""
        trace_id = self._next_id
        self._next_id += 1
        stamps = timestamps(request, end, window)
        trace = (loaded.name, loaded.version, request.id, trace_id, stamps, request.trace_context)
        try:
            self._pending.put_nowait(trace)
        except queue.Full:
            if not self._dropped:
                self._dropped = True
                log.warning(
                    "%d traces are waiting to become spans; dropping later ones", MAX_PENDING
                )

    def _build_all(self) -> None:
        while (trace := self._pending.get()) is not None:
            try:
                self._build(*trace)
            except Exception:  # a bad trace must not stop the others
                log.exception("cannot build the spans of trace %d", trace[3])

    def _build(
        self,
        model_name: str,
        version: int,
        request_id: str,
        trace_id: int,
        stamps: _Stamps,
        client_context: dict[str, str] | None,
    ) -> None:
        wall = {name: ns + self._offset for name, ns in stamps}
        tracer = self._tracer
        server = otel_trace.SpanKind.SERVER
        # Under the client's span when it sent its context (an invalid one is ignored).
        parent = None if client_context is None else _W3C.extract(client_context)
        root = tracer.start_span(
            ROOT_SPAN, context=parent, kind=server, start_time=wall["REQUEST_START"]
        )
        attributes: dict[str, str | int] = {
            "triton.model_name": model_name,
            "triton.model_version": version,
            "triton.trace_id": trace_id,
            "triton.trace_parent_id": 0,
        }
        if request_id:
            attributes["triton.request_id"] = request_id
        model = tracer.start_span(
            model_name,
            context=otel_trace.set_span_in_context(root),
            kind=server,
            start_time=wall["REQUEST_START"],
            attributes=attributes,
        )
        for name in _MODEL_EVENTS:
            model.add_event(name, timestamp=wall[name])
        if "COMPUTE_START" in wall:
            compute = tracer.start_span(
                COMPUTE_SPAN,
                context=otel_trace.set_span_in_context(model),
                kind=server,
                start_time=wall["COMPUTE_START"],
            )
            for name in _COMPUTE_EVENTS:
                compute.add_event(name, timestamp=wall[name])
            compute.end(end_time=wall["COMPUTE_END"])
        model.add_event("REQUEST_END", timestamp=wall["REQUEST_END"])
        model.end(end_time=wall["REQUEST_END"])
        root.end(end_time=wall["REQUEST_END"])

    async def close(self) -> None:
        """Build what is queued, export it and stop both threads, within
        ``CLOSE_TIMEOUT_S`` (a collector that does not answer cannot hold up shutdown)."""
        loop = asyncio.get_running_loop()
        closed: asyncio.Future[None] = loop.create_future()

        def shut() -> None:
            self._pending.put(None)
            self._builder.join()
            self._provider.shutdown()
            loop.call_soon_threadsafe(_settle, closed)

        # A daemon thread, not the default executor: the interpreter never waits on it.
        threading.Thread(target=shut, name="tritium-otel-close", daemon=True).start()
        try:
            await asyncio.wait_for(closed, CLOSE_TIMEOUT_S)
        except TimeoutError:
            log.warning("OpenTelemetry spans were still being exported at shutdown; dropped")


def _settle(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)
