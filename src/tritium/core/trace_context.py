"""The W3C trace context (``traceparent``, ``tracestate``) a client sends with a request.

In OpenTelemetry trace mode a request that carries one is traced whatever the rate and
count say, and its spans join the client's trace (the root span's parent is the client's
span), as Triton does. Frontends read it from HTTP headers or gRPC metadata.
"""

from __future__ import annotations

from collections.abc import Mapping

TRACEPARENT = "traceparent"
TRACESTATE = "tracestate"


def propagated(headers: Mapping[str, str]) -> dict[str, str] | None:
    """The trace context in ``headers`` (lower-case names), None when there is none."""
    parent = headers.get(TRACEPARENT)
    if parent is None:
        return None
    context = {TRACEPARENT: parent}
    state = headers.get(TRACESTATE)
    if state is not None:
        context[TRACESTATE] = state
    return context
