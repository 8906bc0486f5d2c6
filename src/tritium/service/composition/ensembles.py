"""Ensembles: the ensemble builder (one of the model manager's builders) and the version.

An ensemble has no instances of its own. It loads after the models its steps name (the
manager brings them along when models are loaded explicitly), its plan is checked against
their configurations in the model table, and its scheduler submits each step through the
submitter, so every step is an ordinary request to its model. It is ready only while
every composing model is.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from tritium import config as cfg
from tritium import repository as repo
from tritium.core.errors import TritiumError, Unavailable
from tritium.core.latency_histogram import LatencyHistogram
from tritium.core.statistics import ModelStatistics
from tritium.ipc.messages import ToWorker
from tritium.repository.overrides import PrivateFolder
from tritium.scheduling.ensemble import EnsembleScheduler
from tritium.scheduling.ensemble_plan import EnsemblePlan, build_plan
from tritium.service.cache import ResponseStore, VersionCache, cache_for
from tritium.service.lifecycle.builder import Built
from tritium.service.model.classification import Labels, OutputClassifier, read_labels
from tritium.service.model.reshape import OutputReshaper
from tritium.service.model.signature import ModelSignature, signature_from_config
from tritium.service.model.table import ModelTable
from tritium.service.model.version import wait_until_idle
from tritium.service.requests.submitter import SubmitStep, Submitter
from tritium.workers import ModelInstance

log = logging.getLogger("tritium.models")


class EnsembleVersion:
    """One ready ensemble version; it serves as a ``LoadedVersion`` does (``ServedVersion``).

    Steps are submitted through ``submit_step``; step models are looked up in ``table``."""

    def __init__(
        self,
        submit_step: SubmitStep,
        table: ModelTable,
        name: str,
        version: int,
        config: dict[str, Any],
        plan: EnsemblePlan,
        labels: Mapping[str, Labels] | None = None,
    ) -> None:
        self.name = name
        self.version = version
        self.version_str = str(version)
        self.config = config
        self.plan = plan
        self.stats = ModelStatistics()
        self.signature: ModelSignature = signature_from_config(config)
        self.instances: list[ModelInstance] = []
        # Responses are assembled from the steps' (already shaped) outputs.
        self.reshaper: OutputReshaper | None = None
        # The ensemble's own label files apply (as in Triton), not its steps' models'.
        self.classifier = OutputClassifier(self.signature.max_batch_size > 0, labels or {})
        self.decoupled = False
        self.first_response: LatencyHistogram | None = None
        self._table = table
        self.scheduler = EnsembleScheduler(plan, submit_step, self.stats)
        #: Set by the builder when the ensemble opts in and the server has a cache.
        self.cache: VersionCache | None = None

    @property
    def ready(self) -> bool:
        """Ready while every step's model (at its version) is."""
        for step in self.plan.steps:
            try:
                if not self._table.get(step.model_name, step.model_version).ready:
                    return False
            except TritiumError:
                return False
        return True

    def busy(self) -> bool:
        return self.scheduler.statistics().in_flight > 0

    def pending_requests(self) -> int:
        return int(self.scheduler.statistics().queued)

    def watch(self, on_gave_up: Callable[[ModelInstance, str], None]) -> None:
        """An ensemble has no instances of its own to give up."""

    def post(self, message: ToWorker) -> None:
        """An ensemble has no workers of its own to tell."""

    async def drain(self, timeout: float) -> bool:
        return await wait_until_idle(self.busy, timeout)

    async def retire(self, timeout: float, reason: str) -> None:
        await self.drain(timeout)
        await self.stop(timeout, reason)

    async def stop(self, timeout: float, reason: str = "") -> None:
        if self.cache is not None:
            self.cache.drop()
        text = reason or "is unloading"
        self.scheduler.fail_all(Unavailable(f"model '{self.name}' version {self.version} {text}"))
        self.scheduler.close()

    def kill(self) -> None:
        if self.cache is not None:
            self.cache.drop()
        self.scheduler.close()


class EnsembleBuilder:
    """Builds an ensemble's versions (the manager's builder for ensemble configs): steps
    go through ``submitter``, step models are looked up in ``table``."""

    def __init__(
        self,
        submitter: Submitter,
        table: ModelTable,
        gpu_count: int = 0,
        response_store: ResponseStore | None = None,
    ) -> None:
        self._submit_step = submitter.submit_step
        self._table = table
        self._gpu_count = gpu_count
        self._response_store = response_store

    async def build(
        self,
        name: str,
        model_dir: Path,
        pb: cfg.ModelConfig,
        folder: PrivateFolder | None,
        on_selected: Callable[[tuple[int, ...]], None],
    ) -> Built:
        """Complete, validate and plan the ensemble, and make each selected version (the
        step models are loaded first by the manager; ``folder`` is not used)."""
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
        gpus = self._gpu_count
        pb = cfg.complete_config(pb, name, gpu_count=gpus)
        cfg.validate_config(pb, name, gpu_count=gpus)
        # As Triton prints an ensemble's config: with its (non-decoupled) transaction policy,
        # and without max_inflight_requests, a field newer than the Triton we match.
        pb.model_transaction_policy.SetInParent()
        config = cfg.config_to_json(pb)
        scheduling = config.get("ensemble_scheduling", {})
        if not scheduling.get("max_inflight_requests"):
            scheduling.pop("max_inflight_requests", None)
        table = self._table

        def lookup(model: str, version: str) -> dict[str, Any] | None:
            try:
                return table.get(model, version).config
            except TritiumError:
                return None

        plan = build_plan(config, lookup)
        labels = await asyncio.get_running_loop().run_in_executor(
            None, read_labels, model_dir, config
        )
        built = Built(config)
        for number in selection.selected:
            ensemble = EnsembleVersion(
                self._submit_step, table, name, number, config, plan, labels
            )
            ensemble.cache = cache_for(
                self._response_store,
                config,
                ensemble.stats,
                name,
                ensemble.version_str,
                frozenset(ensemble.signature.outputs),
            )
            built.loaded[number] = ensemble
        return built
