"""The transport-neutral API both frontends call: health, metadata, config, infer.

Behaviour lives here once; HTTP and gRPC only decode, call, encode and map errors.
"""

from __future__ import annotations

import asyncio
from functools import partial
from typing import Any

from tritium import __version__
from tritium.core import InferRequest, InferResponse
from tritium.core.clock import now_ns
from tritium.core.errors import InvalidArgument, TritiumError, Unavailable
from tritium.service.models import LoadedVersion, ModelManager

EXTENSIONS = [
    "classification",
    "statistics",
    "schedule_policy",
    "binary_tensor_data",
    "parameters",
    "model_configuration",
]


class Service:
    def __init__(self, models: ModelManager, *, server_id: str = "triton", strict_readiness: bool = True) -> None:
        self.models = models
        self.server_id = server_id
        self.strict_readiness = strict_readiness
        self.started = False
        self.stopping = False

    # -- health and metadata ---------------------------------------------------------------

    def live(self) -> bool:
        return True

    def ready(self) -> bool:
        if not self.started or self.stopping:
            return False
        return self.models.all_ready() if self.strict_readiness else True

    def server_metadata(self) -> dict[str, Any]:
        return {"name": self.server_id, "version": __version__, "extensions": EXTENSIONS}

    def model_ready(self, name: str, version: str) -> bool:
        try:
            return self.models.get(name, version).ready
        except Unavailable:
            return False

    def model_metadata(self, name: str, version: str) -> dict[str, Any]:
        loaded = self.models.get(name, version)
        entry = self.models.models[name]
        if version:
            versions = [loaded.version_str]  # Triton lists only the version asked for
        else:
            versions = [
                str(v) for v in sorted(entry.versions) if entry.versions[v].loaded is not None
            ]
        sig = loaded.signature
        return {
            "name": name,
            "versions": versions,
            "platform": loaded.config.get("platform") or loaded.config.get("backend", ""),
            "inputs": sig.metadata_tensors("inputs"),
            "outputs": sig.metadata_tensors("outputs"),
        }

    def model_config(self, name: str, version: str) -> dict[str, Any]:
        return self.models.get(name, version).config

    def model_statistics(self, name: str, version: str) -> dict[str, Any]:
        """Triton's statistics extension: all models when ``name`` is empty."""
        stats = []
        if not name:
            for model in sorted(self.models.models):
                entry = self.models.models[model]
                for number in sorted(entry.versions):
                    loaded = entry.versions[number].loaded
                    if loaded is not None:
                        stats.append(loaded.stats.as_json(model, loaded.version_str))
            return {"model_stats": stats}
        entry = self.models.models.get(name)
        if entry is None:
            raise InvalidArgument(f"requested model '{name}' is not available")
        if version:
            try:
                loaded = self.models.get(name, version)
            except TritiumError:
                raise InvalidArgument(
                    f"requested model version is not available for model '{name}'"
                ) from None
            return {"model_stats": [loaded.stats.as_json(name, loaded.version_str)]}
        for number in sorted(entry.versions):
            loaded = entry.versions[number].loaded
            if loaded is not None:
                stats.append(loaded.stats.as_json(name, loaded.version_str))
        return {"model_stats": stats}

    # -- inference ---------------------------------------------------------------------------

    def submit(self, request: InferRequest) -> asyncio.Future[InferResponse]:
        """Validate and schedule ``request`` now; the future gets the response.

        Raises at once for requests that cannot be accepted (unknown model, invalid
        input, full queue). This is the frontends' fast path: no task, no coroutine.
        """
        if self.stopping:
            raise Unavailable("Server is shutting down")
        loaded = self.models.get(request.model_name, request.model_version)
        loaded.signature.validate(request)
        request.arrival_ns = now_ns()
        try:
            done = loaded.scheduler.submit(request)
        except TritiumError:
            loaded.stats.record_request(False, now_ns() - request.arrival_ns, 0)
            raise
        done.add_done_callback(partial(_finish, loaded, request))
        return done

    async def infer(self, request: InferRequest) -> InferResponse:
        return await self.submit(request)


def _finish(loaded: LoadedVersion, request: InferRequest, done: asyncio.Future) -> None:
    """Stamp the response with what the client asked for and count it."""
    if done.cancelled():
        return
    start = request.arrival_ns
    if done.exception() is not None:
        loaded.stats.record_request(False, now_ns() - start, 0)
        return
    response = done.result()
    response.model_name = loaded.name
    response.model_version = loaded.version_str
    response.id = request.id
    loaded.stats.record_request(
        response.error is None, now_ns() - start, request.dispatch_ns - start
    )
