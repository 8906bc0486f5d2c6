"""Ensembles in the model manager: load order, loading, and the loaded version.

An ensemble has no instances of its own. It loads after the models its steps name (and
brings them along when models are loaded explicitly), its plan is checked against their
configurations, and its scheduler submits each step through the service, so every step is
an ordinary request to its model. It is ready only while every composing model is.
"""

from __future__ import annotations

import logging
from collections.abc import Collection
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
from tritium.service.model_io import ModelSignature, signature_from_config

if TYPE_CHECKING:
    from tritium.service.models import ModelEntry, ModelManager

log = logging.getLogger("tritium.models")


def _step_models(path: Path, name: str, config_name: str) -> list[str] | None:
    """The models an ensemble's config names, or None when the model is no ensemble (or
    its config cannot be read: loading it reports why)."""
    try:
        pb = cfg.load_config_file(path, name, config_name)
    except Exception:  # noqa: BLE001 - the load itself reports a broken config
        return None
    if pb is None or pb.platform != ENSEMBLE_PLATFORM:
        return None
    return [step.model_name for step in pb.ensemble_scheduling.step]


def load_waves(
    sources: dict[str, repo.ModelSource], names: Collection[str], config_name: str = ""
) -> list[list[str]]:
    """``names`` in waves that load one after the other: models that are no ensemble
    first, then each ensemble once every model it names has had its turn. Ensembles that
    depend on each other in a circle come last (they fail: their steps are not loaded)."""
    deps = {name: _step_models(sources[name].path, name, config_name) for name in sorted(names)}
    waves: list[list[str]] = [[n for n, d in deps.items() if d is None]]
    placed = set(waves[0])
    left = [n for n, d in deps.items() if d is not None]
    while left:
        wave = [n for n in left if all(m in placed or m not in deps for m in deps[n] or ())]
        if not wave:
            waves.append(left)
            break
        waves.append(wave)
        placed.update(wave)
        left = [n for n in left if n not in placed]
    return [w for w in waves if w]


def with_dependencies(
    sources: dict[str, repo.ModelSource], names: Collection[str], config_name: str = ""
) -> set[str]:
    """``names`` plus every model their ensembles need, transitively (explicit loading
    brings an ensemble's composing models along, as Triton does)."""
    wanted = set(names)
    todo = [n for n in wanted if n in sources]
    while todo:
        name = todo.pop()
        for model in _step_models(sources[name].path, name, config_name) or ():
            if model not in wanted:
                wanted.add(model)
                if model in sources:
                    todo.append(model)
    return wanted


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
        self._manager = manager
        self.scheduler = EnsembleScheduler(plan, self._submit_step, self.stats)

    def _submit_step(self, request: InferRequest) -> Completion:
        submit = self._manager.submit_step
        if submit is None:
            raise Unavailable(f"ensemble '{self.name}' is not attached to a service")
        return submit(request)

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

    async def stop(self, timeout: float) -> None:
        self.scheduler.fail_all(Unavailable(f"model '{self.name}' is unloading"))
        self.scheduler.close()


def is_ensemble(pb: cfg.ModelConfig) -> bool:
    return pb.platform == ENSEMBLE_PLATFORM or pb.HasField("ensemble_scheduling")


async def load_ensemble(
    manager: ModelManager, entry: ModelEntry, pb: cfg.ModelConfig, available: list[int]
) -> None:
    """Complete, validate and plan the ensemble, then make each selected version ready."""
    from tritium.service.models import VersionStatus

    name = entry.name
    selection = repo.select_versions(pb.version_policy, available)
    if not selection.selected:
        raise Unavailable(
            f"at least one version must be available under the version policy of model '{name}'"
        )
    for number in selection.selected:
        entry.versions[number] = VersionStatus(number, "LOADING")
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
    entry.config = config

    def lookup(model: str, version: str) -> dict[str, Any] | None:
        try:
            return manager.get(model, version).config
        except TritiumError:
            return None

    plan = build_plan(config, lookup)
    for number in selection.selected:
        status = entry.versions[number]
        status.loaded = EnsembleVersion(manager, name, number, config, plan)  # type: ignore[assignment]
        status.state, status.reason = "READY", ""
