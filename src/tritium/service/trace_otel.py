"""``--trace-config mode=opentelemetry``: sampled requests exported as OpenTelemetry spans.

Each trace has Triton's three spans (all of kind SERVER): ``InferRequest`` (the root, from
request start to request end), a span named after the model (attributes
``triton.model_name``, ``triton.model_version``, ``triton.trace_id``,
``triton.trace_parent_id`` and, when the client gave one, ``triton.request_id``; events
REQUEST_START, QUEUE_START, REQUEST_END) and its child ``compute`` (events
COMPUTE_START, COMPUTE_INPUT_END, COMPUTE_OUTPUT_START, COMPUTE_END; absent when the
request never reached ``execute``). Timestamps are the trace file's, moved from the
monotonic clock onto the wall clock once, at start-up, as Triton does.

Spans go through the SDK's batch span processor: ending a span only queues it, and the
processor's own thread exports over OTLP/HTTP, so nothing here waits on the network or
blocks the event loop. This module imports OpenTelemetry; it is loaded only in this mode.
"""

from __future__ import annotations

import asyncio
import logging
import time

from opentelemetry import trace as otel_trace
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

from tritium import __version__
from tritium.core import InferRequest
from tritium.core.clock import now_ns
from tritium.core.completion import Completion
from tritium.service.models import LoadedVersion
from tritium.service.trace_otel_options import DEFAULT_SERVICE_NAME, OtelOptions
from tritium.service.trace_writer import compute_window, timestamps

log = logging.getLogger("tritium.trace")

TRACER_NAME = "triton-server"
ROOT_SPAN = "InferRequest"
COMPUTE_SPAN = "compute"
_MODEL_EVENTS = ("REQUEST_START", "QUEUE_START")
_COMPUTE_EVENTS = ("COMPUTE_START", "COMPUTE_INPUT_END", "COMPUTE_OUTPUT_START", "COMPUTE_END")
SHUTDOWN_TIMEOUT_S = 30.0


class OtelRecorder:
    """Same interface as ``TraceRecorder``: ``finish`` per sampled request, ``close``."""

    def __init__(self, options: OtelOptions) -> None:
        attributes = {"service.name": DEFAULT_SERVICE_NAME, **dict(options.resource)}
        # Resource.create also merges OTEL_RESOURCE_ATTRIBUTES; given values win.
        self._provider = TracerProvider(resource=Resource.create(attributes))
        self._processor = BatchSpanProcessor(
            OTLPSpanExporter(endpoint=options.url),
            max_queue_size=options.bsp_setting("bsp_max_queue_size"),
            schedule_delay_millis=options.bsp_setting("bsp_schedule_delay"),
            max_export_batch_size=options.bsp_setting("bsp_max_export_batch_size"),
        )
        self._provider.add_span_processor(self._processor)
        self._tracer = self._provider.get_tracer(TRACER_NAME, __version__)
        # monotonic ns + offset = wall-clock ns
        self._offset = time.time_ns() - now_ns()
        self._next_id = 1

    def finish(self, loaded: LoadedVersion, request: InferRequest, done: Completion) -> None:
        """Done-callback of a sampled request: build its spans and queue them for export."""
        end = now_ns()
        trace_id = self._next_id
        self._next_id += 1
        window = None if done.cancelled() else compute_window(loaded, request)
        stamps = dict(timestamps(request, end, window))
        wall = {name: ns + self._offset for name, ns in stamps.items()}
        tracer = self._tracer
        server = otel_trace.SpanKind.SERVER
        root = tracer.start_span(ROOT_SPAN, kind=server, start_time=wall["REQUEST_START"])
        attributes: dict[str, str | int] = {
            "triton.model_name": loaded.name,
            "triton.model_version": loaded.version,
            "triton.trace_id": trace_id,
            "triton.trace_parent_id": 0,
        }
        if request.id:
            attributes["triton.request_id"] = request.id
        model = tracer.start_span(
            loaded.name,
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
        """Export what is queued and stop the processor's thread (off the event loop)."""
        loop = asyncio.get_running_loop()
        try:
            await asyncio.wait_for(
                loop.run_in_executor(None, self._provider.shutdown), SHUTDOWN_TIMEOUT_S
            )
        except TimeoutError:
            log.warning("OpenTelemetry spans were still being exported at shutdown")
