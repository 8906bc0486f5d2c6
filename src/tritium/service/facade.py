"""The transport-neutral API both frontends call: health, metadata, config, statistics,
inference, the repository API, system shared memory, logging and trace settings.

Behaviour lives here once; HTTP and gRPC only decode, call, encode and map errors.
"""

from __future__ import annotations

from typing import Any

from tritium import __version__
from tritium.core.errors import InvalidArgument, NotFound, TritiumError, Unavailable, Unsupported
from tritium.service.lifecycle.repository_api import EXTENSIONS as REPOSITORY_EXTENSIONS
from tritium.service.lifecycle.repository_api import RepositoryControl
from tritium.service.log_settings import LogSettings
from tritium.service.model.table import ModelTable
from tritium.service.requests.submitter import SHM_DISABLED, Submitter

EXTENSIONS = [
    "classification",
    "statistics",
    "schedule_policy",
    "binary_tensor_data",
    "parameters",
    "model_configuration",
    "logging",
    "trace",
    "sequence",
]
# Listed only when clients may register regions. "cuda_shared_memory" is never listed:
# without a CUDA runtime its register call can only fail (see ``cuda_shm_*``).
SHM_EXTENSION = "system_shared_memory"


CUDA_SHM_UNSUPPORTED = (
    "CUDA shared memory is not supported: this server has no CUDA runtime; use system "
    "shared memory instead"
)


class Service:
    """The façade the frontends call: health, metadata, config, statistics, inference
    (through ``submitter``), the repository API (``repository``), shared memory, logging
    and trace settings. It holds no wiring of its own: ``server/app.py`` builds every
    collaborator and passes it in."""

    def __init__(
        self,
        table: ModelTable,
        submitter: Submitter,
        repository: RepositoryControl,
        *,
        server_id: str = "triton",
        strict_readiness: bool = True,
        log_settings: LogSettings | None = None,
    ) -> None:
        self.table = table
        self.submitter = submitter
        self.repository = repository
        self.server_id = server_id
        self.strict_readiness = strict_readiness
        self.started = False
        #: Set on SIGTERM with --drain-delay-secs: not ready, while everything is served.
        self.draining = False
        # The request path's own: frontends call these directly (no extra frame per request).
        self.submit = submitter.submit
        self.is_decoupled = submitter.is_decoupled
        self.replay = submitter.replay
        self.allow_client_shm = submitter.allow_client_shm
        self.shared_memory = submitter.shared_memory
        # The logging extension's live settings (see service/log_settings.py).
        self.log_settings = log_settings if log_settings is not None else LogSettings()
        # The trace extension: settings, sampling, and the recorder (see service/tracing/).
        self.trace_settings = submitter.trace_settings
        self.trace_recorder = submitter.recorder
        extensions = EXTENSIONS + [SHM_EXTENSION] if self.allow_client_shm else EXTENSIONS
        self._extensions = extensions + list(REPOSITORY_EXTENSIONS)

    @property
    def stopping(self) -> bool:
        """Set at shutdown: not ready, and new requests are refused."""
        return self.submitter.stopping

    @stopping.setter
    def stopping(self, value: bool) -> None:
        self.submitter.stopping = value

    # -- health and metadata ---------------------------------------------------------------

    def live(self) -> bool:
        return True

    def ready(self) -> bool:
        if not self.started or self.stopping or self.draining:
            return False
        return self.table.all_ready() if self.strict_readiness else True

    def not_ready_reason(self) -> str:
        """Why :meth:`ready` is false, for an operator: the models that keep the server
        not ready under strict readiness, and why each one is not."""
        if self.stopping or self.draining:
            return "the server is shutting down"
        if not self.started:
            return "the server is starting: models are still loading"
        reasons = self.table.not_ready_reasons() if self.strict_readiness else []
        if not reasons:
            return "the server is not ready"
        return (
            "the server is not ready because not every model is ready (--strict-readiness="
            "true): " + "; ".join(reasons)
        )

    def server_metadata(self) -> dict[str, Any]:
        return {"name": self.server_id, "version": __version__, "extensions": self._extensions}

    def model_ready(self, name: str, version: str) -> bool:
        try:
            return self.table.get(name, version).ready
        except Unavailable:
            return False

    def model_metadata(self, name: str, version: str) -> dict[str, Any]:
        loaded = self.table.get(name, version)
        if version:
            versions = [loaded.version_str]  # Triton lists only the version asked for
        else:
            versions = [v.version_str for v in self.table.loaded(name)]
        sig = loaded.signature
        return {
            "name": name,
            "versions": versions,
            "platform": loaded.config.get("platform") or loaded.config.get("backend", ""),
            "inputs": sig.metadata_tensors("inputs"),
            "outputs": sig.metadata_tensors("outputs"),
        }

    def model_config(self, name: str, version: str) -> dict[str, Any]:
        return self.table.get(name, version).config

    def model_statistics(self, name: str, version: str) -> dict[str, Any]:
        """Triton's statistics extension: all models when ``name`` is empty."""
        if not name:
            return {
                "model_stats": [v.stats.as_json(v.name, v.version_str) for v in self.table.loaded()]
            }
        if name not in self.table:
            raise InvalidArgument(f"requested model '{name}' is not available")
        if version:
            try:
                loaded = self.table.get(name, version)
            except InvalidArgument:
                raise  # a version string that is no version: Triton's own text
            except TritiumError:
                raise InvalidArgument(
                    f"requested model version is not available for model '{name}'"
                ) from None
            return {"model_stats": [loaded.stats.as_json(name, loaded.version_str)]}
        return {
            "model_stats": [v.stats.as_json(name, v.version_str) for v in self.table.loaded(name)]
        }

    # -- model repository (Triton's model repository extension) -----------------------------

    async def repository_index(self, ready_only: bool = False) -> list[dict[str, Any]]:
        """``[{"name", "version"?, "state"?, "reason"?}]`` for every model folder."""
        return await self.repository.index(ready_only)

    async def load_model(self, name: str, parameters: dict[str, Any] | None = None) -> None:
        """Load or reload ``name``; parameters: ``config`` (str), ``file:<path>`` (bytes)."""
        await self.repository.load(name, parameters)

    async def unload_model(self, name: str, unload_dependents: bool = False) -> None:
        await self.repository.unload(name, unload_dependents)

    # -- system shared memory (Triton's shared-memory extension) ----------------------------

    def shm_register(self, name: str, key: str, offset: int, byte_size: int) -> None:
        """Register ``[offset, offset+byte_size)`` of the POSIX shm object ``key``."""
        if not self.allow_client_shm:
            raise Unsupported(SHM_DISABLED)
        self.shared_memory.register(name, key, offset, byte_size)

    def shm_status(self, name: str = "") -> list[dict[str, Any]]:
        """``[{"name", "key", "offset", "byte_size"}]``: every region, or the one named."""
        return self.shared_memory.status(name)

    def shm_unregister(self, name: str = "") -> None:
        """Unregister the region named, or every region when ``name`` is ""."""
        self.shared_memory.unregister(name)

    def cuda_shm_status(self, name: str = "") -> list[dict[str, Any]]:
        """No CUDA region can exist: all of them is none, one of them is not found."""
        if name:
            if self.shared_memory.has(name):
                raise NotFound(
                    f"The region named '{name}' is registered as system shared memory, not "
                    "CUDA shared memory"
                )
            raise NotFound(f"Unable to find cuda shared memory region: '{name}'")
        return []

    def cuda_shm_register(self, name: str, raw_handle: bytes, device_id: int, byte_size: int) -> None:
        raise Unsupported(CUDA_SHM_UNSUPPORTED)

    def cuda_shm_unregister(self, name: str = "") -> None:
        """Nothing is registered, so there is nothing to do (Triton answers success too)."""

    def close(self) -> None:
        """Release server-wide resources (shared-memory mappings) at shutdown."""
        self.shared_memory.close()
