"""What a served model version offers the request path, whatever it is made of.

A ``LoadedVersion`` (instances in worker processes) and an ``EnsembleVersion`` (a plan over
other models' versions) both satisfy :class:`ServedVersion`; the model table, the
submitter, the manager, metrics and tracing use only this.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from tritium.core.latency_histogram import LatencyHistogram
from tritium.core.statistics import ModelStatistics
from tritium.ipc.messages import ToWorker
from tritium.service.cache import VersionCache
from tritium.service.model.classification import OutputClassifier
from tritium.service.model.reshape import OutputReshaper
from tritium.service.model.signature import ModelSignature
from tritium.workers import ModelInstance


class ServedVersion(Protocol):
    name: str
    version: int
    version_str: str
    config: dict[str, Any]
    stats: ModelStatistics
    signature: ModelSignature
    #: None when responses go out exactly as the model made them.
    reshaper: OutputReshaper | None
    classifier: OutputClassifier
    #: The decoupled transaction policy: responses stream, unary infer is refused.
    decoupled: bool
    #: Decoupled models with --metrics-config histogram_latencies=true only.
    first_response: LatencyHistogram | None
    #: The worker instances serving it (none for an ensemble).
    instances: list[ModelInstance]
    #: The response cache in front of the scheduler; None unless the model opts in and
    #: the server has a cache.
    cache: VersionCache | None
    #: Takes requests (``submit``), reports ``statistics()``, fails what it holds.
    scheduler: Any

    @property
    def ready(self) -> bool: ...

    def busy(self) -> bool: ...

    def pending_requests(self) -> int:
        """Requests that reached this version and have not started yet."""
        ...

    def watch(self, on_gave_up: Callable[[ModelInstance, str], None]) -> None: ...

    async def drain(self, timeout: float) -> bool: ...

    async def retire(self, timeout: float, reason: str) -> None: ...

    async def stop(self, timeout: float, reason: str = "") -> None: ...

    def kill(self) -> None: ...

    def post(self, message: ToWorker) -> None:
        """Send a one-way control message to every running worker of this version."""
        ...
