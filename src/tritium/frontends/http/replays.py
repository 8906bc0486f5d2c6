"""Response-cache replays over HTTP: a small request byte-identical (less its id) to one a
cache hit answered is answered from the form kept for it (see ``reused_bodies``).

Two ways in. The infer handler asks :meth:`Replays.body` for a request it has decoded the
head of. :meth:`Replays.quick` is the infer route's quick answer (``router.QuickAnswer``):
for a request that repeats its connection's last head (``request_heads``) it writes the
whole answer in one formatting step, without the request and response objects, routing
or the connection's answer queue. Anything it cannot answer so (a model that had no
replayed hit, compression, a trace context, a body not filed) takes the handler's path,
which answers it as it always would.
"""

from __future__ import annotations

from tritium.core.trace_context import TRACEPARENT
from tritium.frontends.http.reused_bodies import (
    REPLAY_BYTES,
    Body,
    ReplayKey,
    replay_key,
    spliced,
    spliced_answer,
)
from tritium.frontends.http.router import Params
from tritium.service.api import ServiceApi


class Replays:
    """The replays of one HTTP frontend's infer route."""

    __slots__ = ("_service", "models")

    def __init__(self, service: ServiceApi) -> None:
        self._service = service
        # Models that had a small request answered from the response cache: only their
        # requests are keyed for a replay.
        self.models: set[str] = set()

    def body(self, model: str, version: str, keyed: ReplayKey) -> Body | None:
        """The answer's body filed for ``keyed``, its id spliced in; None if none."""
        kept = self._service.replay(model, version, keyed.key)
        return None if kept is None else spliced(kept, keyed.request_id)

    def quick(self, params: Params, headers: dict[str, str], body: bytes) -> bytes | None:
        """The whole answer filed for this request, or None (see the module docstring)."""
        model = params["model"]
        if (
            model not in self.models
            or len(body) > REPLAY_BYTES
            or "content-encoding" in headers
            or "accept-encoding" in headers
            or TRACEPARENT in headers
        ):
            return None
        version = params.get("version", "")
        keyed = replay_key(model, version, body, headers.get("inference-header-content-length"))
        if keyed is None:
            return None
        kept = self._service.replay(model, version, keyed.key)
        return None if kept is None else spliced_answer(kept, keyed.request_id)
