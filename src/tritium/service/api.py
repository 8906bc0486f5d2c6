"""The operations a frontend may call, declared once.

``Service`` (service/facade.py) implements :class:`ServiceApi`; the gRPC transports and
the metrics endpoint are typed against this Protocol, not the concrete class. Versions are
strings; "" means the model's default version. Errors are
:class:`tritium.core.errors.TritiumError` subclasses, mapped to status codes inside each
frontend.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterator
from typing import Any, Protocol

from tritium.core import Completion, InferRequest, InferResponse
from tritium.service.log_settings import LogSettings
from tritium.service.model.interface import ServedVersion
from tritium.service.requests.streams import Emit
from tritium.service.tracing.settings import TraceSettings


class LoadedModels(Protocol):
    """The model table, read only: every loaded version (metrics read their statistics)."""

    def loaded(self, name: str | None = None) -> Iterator[ServedVersion]: ...


class ServiceApi(Protocol):
    @property
    def table(self) -> LoadedModels:
        """The model table, read only."""
        ...

    @property
    def log_settings(self) -> LogSettings:
        """The logging extension's live settings."""
        ...

    @property
    def trace_settings(self) -> TraceSettings:
        """The trace extension's settings."""
        ...

    # -- health and metadata
    def live(self) -> bool: ...

    def ready(self) -> bool: ...

    def not_ready_reason(self) -> str: ...

    def server_metadata(self) -> dict[str, Any]: ...

    def model_ready(self, name: str, version: str) -> bool: ...

    def model_metadata(self, name: str, version: str) -> dict[str, Any]: ...

    def model_config(self, name: str, version: str) -> dict[str, Any]: ...

    def model_statistics(self, name: str, version: str) -> dict[str, Any]: ...

    # -- inference
    def submit(
        self, request: InferRequest, stream: Emit | None = None
    ) -> Completion[InferResponse]: ...

    def is_decoupled(self, name: str, version: str) -> bool: ...

    def replay(self, name: str, version: str, replay: Hashable) -> Any:
        """The encoded answer a frontend filed with the response cache for a request with
        exactly these bytes (``EncodedForms.keep_replay``), counted as a cache hit; None
        when the request must take the full path."""
        ...

    # -- model repository
    async def repository_index(self, ready_only: bool = False) -> list[dict[str, Any]]: ...

    async def load_model(self, name: str, parameters: dict[str, Any] | None = None) -> None: ...

    async def unload_model(self, name: str, unload_dependents: bool = False) -> None: ...

    # -- shared memory
    def shm_register(self, name: str, key: str, offset: int, byte_size: int) -> None: ...

    def shm_status(self, name: str = "") -> list[dict[str, Any]]: ...

    def shm_unregister(self, name: str = "") -> None: ...

    def cuda_shm_status(self, name: str = "") -> list[dict[str, Any]]: ...

    def cuda_shm_register(
        self, name: str, raw_handle: bytes, device_id: int, byte_size: int
    ) -> None: ...

    def cuda_shm_unregister(self, name: str = "") -> None: ...
