"""One loaded version of a model: its config, signature, instances and scheduler.

A version is built complete (every instance started, warmed up) before it is put in
service, and it is taken out of service before it is stopped: ``retire`` waits until no
request is queued on it or running in one of its instances (requests that reached it before
it was replaced or unloaded finish normally), then stops its workers.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from typing import Any

from tritium.config.instance_devices import instance_devices
from tritium.config.rate_limiter import GroupRateLimiter, group_rate_limiter
from tritium.core.errors import Unavailable
from tritium.core.heap import collect_released
from tritium.core.latency_histogram import LatencyHistogram
from tritium.core.statistics import ModelStatistics
from tritium.ipc.messages import ToWorker
from tritium.repository.overrides import PrivateFolder
from tritium.scheduling import (
    BatchingConfig,
    BatchPolicy,
    DefaultScheduler,
    DynamicBatcher,
    RateLimiter,
    Runner,
    SequenceBatcher,
    SequenceConfig,
)
from tritium.service.cache import VersionCache
from tritium.service.model.classification import Labels, OutputClassifier
from tritium.service.model.reshape import OutputReshaper, output_reshaper
from tritium.service.model.signature import ModelSignature, signature_from_config
from tritium.workers import InstanceSpec, ModelInstance

log = logging.getLogger("tritium.models")

_DRAIN_POLL_S = 0.005


class LoadedVersion:
    """One ready version: its config, signature, instances and scheduler, and what its
    responses need before they are sent (output reshapes, classification labels)."""

    def __init__(
        self,
        name: str,
        version: int,
        config: dict[str, Any],
        instances: list[ModelInstance],
        stats: ModelStatistics,
        folder: PrivateFolder | None = None,
        initial_states: dict[str, Any] | None = None,
        labels: Mapping[str, Labels] | None = None,
        limiter: RateLimiter | None = None,
        runners: list[Runner] | None = None,
    ) -> None:
        self.name = name
        self.stats = stats
        self.version = version
        self.version_str = str(version)
        self.config = config
        self.signature: ModelSignature = signature_from_config(config)
        batched = self.signature.max_batch_size > 0
        # None for the usual model: its responses then go out exactly as the model made them.
        self.reshaper: OutputReshaper | None = output_reshaper(
            batched, self.signature.outputs.values()
        )
        self.classifier = OutputClassifier(batched, labels or {})
        self.instances = instances
        # What the scheduler drives: the instances, some wrapped by the rate limiter.
        self.runners: list[Any] = runners if runners is not None else list(instances)
        self._limiter = limiter
        self.scheduler = make_scheduler(config, self.runners, initial_states)
        #: Set by the builder when the model opts in and the server has a cache.
        self.cache: VersionCache | None = None
        #: The decoupled transaction policy: responses stream, unary infer is refused.
        self.decoupled = bool(config.get("model_transaction_policy", {}).get("decoupled"))
        #: Decoupled models with --metrics-config histogram_latencies=true only.
        self.first_response: LatencyHistogram | None = None
        self._folder = folder
        if folder is not None:
            folder.acquire()
        self._stopped = False

    @property
    def ready(self) -> bool:
        return all(i.ready for i in self.instances)

    def busy(self) -> bool:
        """Requests are queued on this version or running in one of its instances."""
        return self.scheduler.statistics().queued > 0 or any(r.busy for r in self.runners)

    def pending_requests(self) -> int:
        """Requests not started yet: queued in the scheduler, or in a batch an instance
        holds while it waits for the rate limiter (Triton counts both as pending)."""
        queued = self.scheduler.statistics().queued
        if self._limiter is not None:
            queued += sum(getattr(r, "waiting_requests", 0) for r in self.runners)
        return queued

    def watch(self, on_gave_up: Callable[[ModelInstance, str], None]) -> None:
        """``on_gave_up(instance, reason)`` when an instance stops restarting."""
        for instance in self.instances:
            instance.on_gave_up(on_gave_up)

    async def drain(self, timeout: float) -> bool:
        """Wait until nothing is queued or running here; False when ``timeout`` passed."""
        return await wait_until_idle(self.busy, timeout)

    async def retire(self, timeout: float, reason: str) -> None:
        """Let what reached this version finish (up to ``timeout``), then stop it."""
        if not await self.drain(timeout):
            log.warning(
                "model '%s' version %d still had requests after %.0f s; failing them",
                self.name,
                self.version,
                timeout,
            )
        await self.stop(timeout, reason)

    async def stop(self, timeout: float, reason: str = "") -> None:
        """Fail what is still queued, stop every instance, release the model folder."""
        if self._stopped:
            return
        self._stopped = True
        if self.cache is not None:
            self.cache.drop()
        text = reason or "is unloading"
        self.scheduler.fail_all(Unavailable(f"model '{self.name}' version {self.version} {text}"))
        self.scheduler.close()
        if self._limiter is not None:
            self._limiter.unregister(self.runners, text)
        try:
            await asyncio.gather(*(i.stop(timeout) for i in self.instances))
        finally:
            if self._folder is not None:
                self._folder.release()
                self._folder = None
            collect_released()

    def post(self, message: ToWorker) -> None:
        """Send a one-way control message to every running worker of this version."""
        for instance in self.instances:
            process = instance.process
            if process is not None:
                process.post(message)

    def kill(self) -> None:
        if self.cache is not None:
            self.cache.drop()
        if self._limiter is not None:
            self._limiter.unregister(self.runners)
        for instance in self.instances:
            instance.kill()
        if self._folder is not None:
            self._folder.release()
            self._folder = None


async def wait_until_idle(busy: Callable[[], bool], timeout: float) -> bool:
    """Wait until ``busy()`` is false; False when ``timeout`` passed first."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while busy():
        if loop.time() >= deadline:
            return False
        await asyncio.sleep(_DRAIN_POLL_S)
    return True


def make_scheduler(
    config: dict[str, Any],
    instances: list[Any],
    initial_states: dict[str, Any] | None = None,
) -> DefaultScheduler | DynamicBatcher | SequenceBatcher:
    """The sequence batcher for a stateful model, the dynamic batcher when the model asks
    for it (and can batch), else Triton's default scheduler."""
    if "sequence_batching" in config:
        sequence_config = SequenceConfig.from_config(config)
        return SequenceBatcher(instances, sequence_config, initial_states=initial_states)  # type: ignore[arg-type]
    if "dynamic_batching" in config and int(config.get("max_batch_size", 0)) > 0:
        policy = BatchPolicy(BatchingConfig.from_config(config))
        return DynamicBatcher(instances, policy)  # type: ignore[arg-type]
    return DefaultScheduler(instances)  # type: ignore[arg-type]


def instance_specs(config: dict[str, Any]) -> list[InstanceSpec]:
    return [spec for spec, _ in instance_plan(config)]


def instance_plan(config: dict[str, Any]) -> list[tuple[InstanceSpec, GroupRateLimiter]]:
    """Every instance of ``config`` with its device (see ``config.instance_devices``) and
    its group's rate limiter settings."""
    limits = [group_rate_limiter(group) for group in config.get("instance_group", ())]
    return [
        (InstanceSpec(d.name, d.kind, d.device_id, d.env), limits[d.group])
        for d in instance_devices(config)
    ]
