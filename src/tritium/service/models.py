"""Loading, serving and unloading the models of the repository.

For each model: read ``config.pbtxt`` (or start empty), pick versions by the version policy,
let model.py auto-complete the config in a worker, fill Triton's defaults, validate, then
start every instance of every selected version and put a scheduler in front of them. A model
that fails at any step is UNAVAILABLE with the reason, and nothing it started is left running.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tritium import config as cfg
from tritium import repository as repo
from tritium.core import Completion, InferRequest
from tritium.core.errors import NotFound, TritiumError, Unavailable
from tritium.core.statistics import ModelStatistics
from tritium.scheduling import BatchingConfig, BatchPolicy, DefaultScheduler, DynamicBatcher
from tritium.service import ensembles
from tritium.service.model_io import ModelSignature, signature_from_config
from tritium.workers import InstanceSpec, ModelInstance, WorkerProcess
from tritium.workers.calls import CallHandler

log = logging.getLogger("tritium.models")

LOAD_TIMEOUT_S = 600.0
STOP_TIMEOUT_S = 30.0


@dataclass(frozen=True, slots=True)
class LoadOptions:
    auto_complete: bool = True
    model_config_name: str = ""
    log_verbose: int = 0
    gpu_count: int = 0
    load_timeout_s: float = LOAD_TIMEOUT_S


class LoadedVersion:
    """One ready version: its config, signature, instances and scheduler."""

    def __init__(
        self,
        name: str,
        version: int,
        config: dict[str, Any],
        instances: list[ModelInstance],
        stats: ModelStatistics,
    ) -> None:
        self.name = name
        self.stats = stats
        self.version = version
        self.version_str = str(version)
        self.config = config
        self.signature: ModelSignature = signature_from_config(config)
        self.instances = instances
        self.scheduler = make_scheduler(config, instances)

    @property
    def ready(self) -> bool:
        return all(i.ready for i in self.instances)

    async def stop(self, timeout: float) -> None:
        self.scheduler.fail_all(Unavailable(f"model '{self.name}' is unloading"))
        self.scheduler.close()
        await asyncio.gather(*(i.stop(timeout) for i in self.instances))


@dataclass(slots=True)
class VersionStatus:
    version: int
    state: str  # READY | UNAVAILABLE | LOADING | UNLOADING
    reason: str = ""
    loaded: LoadedVersion | None = None


@dataclass(slots=True)
class ModelEntry:
    name: str
    source: repo.ModelSource
    versions: dict[int, VersionStatus] = field(default_factory=dict)
    state: str = "UNKNOWN"
    reason: str = ""
    config: dict[str, Any] | None = None

    def default_version(self) -> LoadedVersion | None:
        """The highest loaded version (asked on every request without a version)."""
        best: VersionStatus | None = None
        for status in self.versions.values():
            if status.loaded is not None and (best is None or status.version > best.version):
                best = status
        return best.loaded if best is not None else None


def make_scheduler(
    config: dict[str, Any], instances: list[ModelInstance]
) -> DefaultScheduler | DynamicBatcher:
    """The dynamic batcher when the model asks for it (and can batch), else Triton's
    default scheduler."""
    if "dynamic_batching" in config and int(config.get("max_batch_size", 0)) > 0:
        policy = BatchPolicy(BatchingConfig.from_config(config))
        return DynamicBatcher(instances, policy)  # type: ignore[arg-type]
    return DefaultScheduler(instances)  # type: ignore[arg-type]


def _instance_specs(config: dict[str, Any]) -> list[InstanceSpec]:
    specs: list[InstanceSpec] = []
    for group in config.get("instance_group", ()):
        kind = group.get("kind", "KIND_CPU").removeprefix("KIND_")
        count = int(group.get("count", 1))
        gpus = [int(g) for g in group.get("gpus", ())] if kind == "GPU" else [0]
        # Triton's order and names: every count index on every listed device.
        for c in range(count):
            for device in gpus:
                specs.append(InstanceSpec(f"{group['name']}_{c}", kind, device))
    return specs


class ModelManager:
    def __init__(self, roots: list[Path], options: LoadOptions) -> None:
        self.roots = roots
        self.options = options
        self.models: dict[str, ModelEntry] = {}
        # The service's submit, set when the service is built: ensembles submit their steps
        # (and model code its BLS requests) through it.
        self.submit_step: Callable[[InferRequest], Completion] | None = None
        # What answers model code's requests (BLS), given to every worker; set by the service.
        self.call_handler: CallHandler | None = None

    # -- queries ------------------------------------------------------------------------

    def get(self, name: str, version: str = "") -> LoadedVersion:
        entry = self.models.get(name)
        if entry is None:
            raise NotFound(f"Request for unknown model: '{name}' is not found")
        if version:
            try:
                number = int(version)
            except ValueError:
                raise NotFound(
                    f"Request for unknown model: '{name}' version {version} is not found"
                ) from None
            status = entry.versions.get(number)
            if status is None:
                raise NotFound(
                    f"Request for unknown model: '{name}' version {version} is not found"
                )
            if status.loaded is None:
                raise Unavailable(
                    f"Request for unknown model: '{name}' version {version} is not at ready state"
                )
            return status.loaded
        loaded = entry.default_version()
        if loaded is None:
            raise NotFound(f"Request for unknown model: '{name}' has no available versions")
        return loaded

    def all_ready(self) -> bool:
        return all(
            status.loaded is not None and status.loaded.ready
            for entry in self.models.values()
            for status in entry.versions.values()
        ) and all(entry.state == "READY" for entry in self.models.values())

    def table(self) -> list[tuple[str, str, str]]:
        rows = []
        for name in sorted(self.models):
            entry = self.models[name]
            if not entry.versions:
                rows.append((name, "-", f"UNAVAILABLE: {entry.reason}"))
            for number in sorted(entry.versions):
                status = entry.versions[number]
                text = status.state if not status.reason else f"{status.state}: {status.reason}"
                rows.append((name, str(number), text))
        return rows

    # -- loading ------------------------------------------------------------------------

    async def load_all(self, only: Collection[str] | None = None) -> None:
        """Load every model of the repositories (or just ``only``, for explicit control)."""
        sources = await asyncio.get_running_loop().run_in_executor(
            None, repo.scan_repositories, self.roots
        )
        if only is not None:
            only = ensembles.with_dependencies(sources, only, self.options.model_config_name)
            unknown = sorted(set(only) - set(sources))
            for name in unknown:
                self.models[name] = ModelEntry(
                    name,
                    repo.ModelSource(name, Path(), Path()),
                    state="UNAVAILABLE",
                    reason=f"failed to load '{name}', failed to poll from model repository",
                )
            sources = {name: src for name, src in sources.items() if name in only}
        for name, source in sources.items():
            self.models[name] = ModelEntry(name, source, state="LOADING")
        # Ensembles load after the models their steps name.
        waves = await asyncio.get_running_loop().run_in_executor(
            None, ensembles.load_waves, sources, list(sources), self.options.model_config_name
        )
        for wave in waves:
            await asyncio.gather(*(self._load(self.models[name]) for name in wave))

    async def _load(self, entry: ModelEntry) -> None:
        try:
            await self._load_versions(entry)
        except TritiumError as exc:
            entry.state, entry.reason = "UNAVAILABLE", exc.message
            for status in entry.versions.values():
                if status.loaded is None:
                    status.state, status.reason = "UNAVAILABLE", exc.message
        except Exception as exc:  # noqa: BLE001 - a broken model must not stop the server
            log.exception("loading model '%s' failed", entry.name)
            entry.state, entry.reason = "UNAVAILABLE", f"internal error: {exc}"
        else:
            ok = any(s.loaded is not None for s in entry.versions.values())
            entry.state = "READY" if ok and all(
                s.loaded is not None for s in entry.versions.values()
            ) else "UNAVAILABLE"
            if not ok and not entry.reason:
                entry.reason = "no version could be loaded"

    async def _read_config(self, entry: ModelEntry) -> tuple[Any, list[int]]:
        loop = asyncio.get_running_loop()
        path = entry.source.path
        pb = await loop.run_in_executor(
            None, cfg.load_config_file, path, entry.name, self.options.model_config_name
        )
        if pb is None:
            if not self.options.auto_complete:
                raise Unavailable(
                    f"failed to load model '{entry.name}': no model configuration "
                    "'config.pbtxt' and auto-complete is disabled"
                )
            pb = cfg.ModelConfig(name=entry.name)
        available = await loop.run_in_executor(None, repo.available_versions, path)
        return pb, available

    async def _load_versions(self, entry: ModelEntry) -> None:
        name = entry.name
        pb, available = await self._read_config(entry)
        if ensembles.is_ensemble(pb):
            await ensembles.load_ensemble(self, entry, pb, available)
            return
        selection = repo.select_versions(pb.version_policy, available)
        if not selection.selected:
            raise Unavailable(
                f"at least one version must be available under the version policy of "
                f"model '{name}'"
            )
        for number in selection.missing:
            # As Triton: logged, not loaded, and not held against the model's readiness.
            log.error(
                "version %d is specified for model '%s', but the version directory is not present",
                number,
                name,
            )
        for number in selection.selected:
            entry.versions[number] = VersionStatus(number, "LOADING")

        # Auto-complete runs in a worker for the newest version; that worker is then kept as
        # the first instance of that version.
        newest = max(selection.selected)
        first = WorkerProcess(f"{name}:{newest}", calls=self.call_handler)
        try:
            await first.spawn()
            reply = await first.load(
                self._load_spec(entry, newest, cfg.config_to_json(pb), self.options.auto_complete),
                self.options.load_timeout_s,
            )
            if reply.get("config") is not None:
                pb = cfg.config_from_dict(reply["config"])
            pb = cfg.complete_config(pb, name, gpu_count=self.options.gpu_count)
            cfg.validate_config(pb, name, gpu_count=self.options.gpu_count)
        except BaseException:
            await first.stop(1.0)
            raise
        config = cfg.config_to_json(pb)
        entry.config = config
        spare: list[WorkerProcess] = [first]

        async def load_version(number: int) -> None:
            status = entry.versions[number]
            try:
                status.loaded = await self._start_version(entry, number, config, spare)
                status.state, status.reason = "READY", ""
            except TritiumError as exc:
                status.state, status.reason = "UNAVAILABLE", exc.message

        try:
            await asyncio.gather(*(load_version(n) for n in selection.selected))
        finally:
            for process in spare:
                await process.stop(1.0)

    def _load_spec(
        self, entry: ModelEntry, version: int, config: dict[str, Any], auto_complete: bool
    ) -> dict[str, Any]:
        return {
            "model_name": entry.name,
            "model_version": str(version),
            "model_dir": str(entry.source.path),
            "config": config,
            "auto_complete": auto_complete,
            "log_verbose": self.options.log_verbose,
        }

    async def _start_version(
        self,
        entry: ModelEntry,
        version: int,
        config: dict[str, Any],
        spare: list[WorkerProcess],
    ) -> LoadedVersion:
        timeout = self.options.load_timeout_s

        async def starter(instance: ModelInstance) -> WorkerProcess:
            process: WorkerProcess | None = None
            if spare and spare[0].label == f"{entry.name}:{version}" and spare[0].alive:
                process = spare.pop()
            try:
                if process is None:
                    process = WorkerProcess(f"{entry.name}:{version}", calls=self.call_handler)
                    await process.spawn()
                    await process.load(self._load_spec(entry, version, config, False), timeout)
                await process.initialize(instance.init_message(config), timeout)
                return process
            except BaseException:
                if process is not None:
                    await process.stop(1.0)
                raise

        stats = ModelStatistics()
        instances = [ModelInstance(spec, starter, stats) for spec in _instance_specs(config)]
        results = await asyncio.gather(*(i.start() for i in instances), return_exceptions=True)
        errors = [r for r in results if isinstance(r, BaseException)]
        if errors:
            await asyncio.gather(*(i.stop(1.0) for i in instances))
            first = errors[0]
            if isinstance(first, TritiumError):
                raise first
            raise Unavailable(f"failed to load model '{entry.name}': {first}")
        return LoadedVersion(entry.name, version, config, instances, stats)

    # -- shutdown -----------------------------------------------------------------------

    async def unload_all(self, timeout: float = STOP_TIMEOUT_S) -> None:
        tasks = []
        for entry in self.models.values():
            for status in entry.versions.values():
                if status.loaded is not None:
                    status.state = "UNLOADING"
                    tasks.append(status.loaded.stop(timeout))
        await asyncio.gather(*tasks, return_exceptions=True)
        for entry in self.models.values():
            for status in entry.versions.values():
                status.loaded = None
                status.state = "UNAVAILABLE"
                status.reason = "unloaded"

    def kill_all(self) -> None:
        for entry in self.models.values():
            for status in entry.versions.values():
                if status.loaded is not None:
                    for instance in status.loaded.instances:
                        instance.kill()

