"""Ensembles in the model manager: load order, loading, and the loaded version.

An ensemble has no instances of its own. It loads after the models its steps name (and
brings them along when models are loaded explicitly), its plan is checked against their
configurations, and its scheduler submits each step through the service, so every step is
an ordinary request to its model. It is ready only while every composing model is.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tritium import config as cfg
from tritium import repository as repo
from tritium.config.backends import ENSEMBLE_PLATFORM
from tritium.core import Completion, InferRequest
from tritium.core.errors import TritiumError, Unavailable
from tritium.core.statistics import ModelStatistics
from tritium.scheduling.ensemble import EnsembleScheduler
from tritium.scheduling.ensemble_plan import EnsemblePlan, build_plan
from tritium.service.lifecycle.builder import Built
from tritium.service.model.classification import OutputClassifier
from tritium.service.model.signature import ModelSignature, signature_from_config
from tritium.service.model.version import wait_until_idle

if TYPE_CHECKING:
    from tritium.service.lifecycle.manager import ModelManager

log = logging.getLogger("tritium.models")


class EnsembleVersion:
    """One ready ensemble version; the service uses it as it uses a ``LoadedVersion``."""

    def __init__(
        self,
        manager: ModelManager,
        name: str,
        version: int,
        config: dict[str, Any],
        plan: EnsemblePlan,
    ) -> None:
        self.name = name
        self.version = version
        self.version_str = str(version)
        self.config = config
        self.plan = plan
        self.stats = ModelStatistics()
        self.signature: ModelSignature = signature_from_config(config)
        self.instances: list[Any] = []
        # Responses are assembled from the steps' (already shaped) outputs.
        self.reshaper = None
        self.classifier = OutputClassifier(self.signature.max_batch_size > 0, {})
        self.decoupled = False
        self._manager = manager
        self.scheduler = EnsembleScheduler(plan, self._submit_step, self.stats, self._step_timing)

    def _submit_step(self, request: InferRequest) -> Completion:
        submit = self._manager.submit_step
        if submit is None:
            raise Unavailable(f"ensemble '{self.name}' is not attached to a service")
        return submit(request)

    def _step_timing(self, request: InferRequest) -> tuple[int, int, int] | None:
        """The compute times of the batch that ran step ``request``, read as it completes
        (its instance's last finished batch is that batch then: completions call back
        synchronously)."""
        try:
            loaded = self._manager.get(request.model_name, request.model_version)
        except TritiumError:
            return None
        dispatched = request.dispatch_ns
        for instance in loaded.instances:
            # Requests of one batch share the dispatch time their instance gave them.
            if dispatched and instance.finished_dispatch_ns == dispatched:
                input_ns, infer_ns, output_ns = instance.finished_timing
                return input_ns, infer_ns, output_ns
        return None

    @property
    def ready(self) -> bool:
        """Ready while every step's model (at its version) is."""
        for step in self.plan.steps:
            try:
                if not self._manager.get(step.model_name, step.model_version).ready:
                    return False
            except TritiumError:
                return False
        return True

    def busy(self) -> bool:
        return self.scheduler.statistics().in_flight > 0

    def watch(self, on_gave_up: Callable[[Any, str], None]) -> None:
        """An ensemble has no instances of its own to give up."""

    async def drain(self, timeout: float) -> bool:
        return await wait_until_idle(self.busy, timeout)

    async def retire(self, timeout: float, reason: str) -> None:
        await self.drain(timeout)
        await self.stop(timeout, reason)

    async def stop(self, timeout: float, reason: str = "") -> None:
        text = reason or "is unloading"
        self.scheduler.fail_all(Unavailable(f"model '{self.name}' version {self.version} {text}"))
        self.scheduler.close()

    def kill(self) -> None:
        self.scheduler.close()


def is_ensemble(pb: cfg.ModelConfig) -> bool:
    return pb.platform == ENSEMBLE_PLATFORM or pb.HasField("ensemble_scheduling")


async def build_ensemble(
    manager: ModelManager,
    name: str,
    model_dir: Path,
    pb: cfg.ModelConfig,
    on_selected: Callable[[tuple[int, ...]], None],
) -> Built:
    """Complete, validate and plan the ensemble, and make each selected version (the
    step models are loaded first by the manager)."""
    if not pb.name:
        pb.name = name
    available = await asyncio.get_running_loop().run_in_executor(
        None, repo.available_versions, model_dir
    )
    selection = repo.select_versions(pb.version_policy, available)
    if not selection.selected:
        raise Unavailable(
            f"at least one version must be available under the version policy of model '{name}'"
        )
    on_selected(tuple(selection.selected))
    gpus = manager.options.gpu_count
    pb = cfg.complete_config(pb, name, gpu_count=gpus)
    cfg.validate_config(pb, name, gpu_count=gpus)
    # As Triton prints an ensemble's config: with its (non-decoupled) transaction policy,
    # and without max_inflight_requests, a field newer than the Triton we match.
    pb.model_transaction_policy.SetInParent()
    config = cfg.config_to_json(pb)
    scheduling = config.get("ensemble_scheduling", {})
    if not scheduling.get("max_inflight_requests"):
        scheduling.pop("max_inflight_requests", None)

    def lookup(model: str, version: str) -> dict[str, Any] | None:
        try:
            return manager.get(model, version).config
        except TritiumError:
            return None

    plan = build_plan(config, lookup)
    built = Built(config)
    for number in selection.selected:
        built.loaded[number] = EnsembleVersion(manager, name, number, config, plan)  # type: ignore[assignment]
    return built
