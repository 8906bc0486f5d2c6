"""The service interface the HTTP frontend calls; the frontend knows nothing else.

The service layer implements :class:`InferenceService`. Versions are strings; "" means
the model's default version. Errors are :class:`tritium.core.errors.TritiumError`
subclasses, mapped to HTTP status codes by :mod:`tritium.frontends.http.status`.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from tritium.core.completion import Completion
from tritium.core.types import InferRequest, InferResponse


@runtime_checkable
class InferenceService(Protocol):
    def live(self) -> bool: ...

    def ready(self) -> bool: ...

    def server_metadata(self) -> dict:
        """``{"name", "version", "extensions": [...]}``."""
        ...

    def model_ready(self, name: str, version: str) -> bool:
        """Raises NotFound for an unknown model."""
        ...

    def model_metadata(self, name: str, version: str) -> dict:
        """Triton's model metadata JSON; raises NotFound / Unavailable."""
        ...

    def model_config(self, name: str, version: str) -> dict:
        """Triton's model configuration JSON; raises NotFound / Unavailable."""
        ...

    def submit(self, request: InferRequest) -> Completion[InferResponse]:
        """Schedule now (raising at once for requests that cannot be accepted); the
        future gets the response. Cancelling the future abandons the request."""
        ...


@runtime_checkable
class ReadinessReasons(Protocol):
    """Optional extra: why the server is not ready, said in ``/v2/health/ready``'s body
    (Triton answers the same 400 with an empty body)."""

    def not_ready_reason(self) -> str: ...


@runtime_checkable
class SharedMemoryService(Protocol):
    """Optional extra: Triton's shared-memory extension (system regions; CUDA answered
    as a server without a CUDA runtime answers it). Names "" mean every region."""

    def shm_register(self, name: str, key: str, offset: int, byte_size: int) -> None: ...

    def shm_status(self, name: str = "") -> list[dict]:
        """``[{"name", "key", "offset", "byte_size"}]``; raises NotFound for an unknown name."""
        ...

    def shm_unregister(self, name: str = "") -> None: ...

    def cuda_shm_status(self, name: str = "") -> list[dict]: ...

    def cuda_shm_register(
        self, name: str, raw_handle: bytes, device_id: int, byte_size: int
    ) -> None: ...

    def cuda_shm_unregister(self, name: str = "") -> None: ...
