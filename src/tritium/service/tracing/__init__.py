"""Triton's trace extension: settings and sampling, the recorders (trace file and
OpenTelemetry)."""
