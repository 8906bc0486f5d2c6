"""Which recorder traces sampled requests: the trace file's, or OpenTelemetry's."""

from __future__ import annotations

from tritium.service.tracing.recorder import Recorder
from tritium.service.tracing.settings import TraceSettings
from tritium.service.tracing.trace_file import TraceRecorder


def new_recorder(settings: TraceSettings) -> Recorder:
    """The trace file's recorder, or the OpenTelemetry exporter in that mode."""
    if settings.opentelemetry is not None:
        from tritium.service.tracing.otel import OtelRecorder

        return OtelRecorder(settings.opentelemetry)
    return TraceRecorder(settings)
