"""Building the versions of one model load, beside whatever serves now.

Read ``config.pbtxt`` (or start empty), pick versions by the version policy, let model.py
auto-complete the config in a worker, fill Triton's defaults, validate, then start every
instance of every selected version and warm it up. A version that fails at any step is
reported with the reason, and nothing it started is left running.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from tritium import config as cfg
from tritium import repository as repo
from tritium.config.instance_devices import (
    DeviceParameterError,
    InstanceDevice,
    describe,
    instance_devices,
)
from tritium.core.clock import now_ns
from tritium.core.errors import TritiumError, Unavailable
from tritium.core.latency_histogram import LatencyHistogram, first_response_buckets
from tritium.core.latency_summary import SummarizedStatistics
from tritium.core.statistics import ModelStatistics
from tritium.repository.overrides import PrivateFolder
from tritium.scheduling import RateLimiter, load_initial_states
from tritium.service.cache import ResponseStore, cache_for
from tritium.service.lifecycle.warmup import warm_up
from tritium.service.model.classification import Labels, read_labels
from tritium.service.model.interface import ServedVersion
from tritium.service.model.version import LoadedVersion, instance_plan
from tritium.workers import (
    BackoffPolicy,
    CrashPolicy,
    ModelInstance,
    RestartPolicy,
    WorkerProcess,
)
from tritium.workers.calls import CallHandler
from tritium.workers.execution_env import WorkerPython, prepare

log = logging.getLogger("tritium.models")

LOAD_TIMEOUT_S = 600.0
DRAIN_TIMEOUT_S = 30.0


@dataclass(frozen=True, slots=True)
class LoadOptions:
    auto_complete: bool = True
    model_config_name: str = ""
    log_verbose: int = 0
    gpu_count: int = 0
    # Importing model.py (and auto-complete) and each instance's initialize() must finish
    # within this (``--backend-config=python,initialize-timeout-seconds=N``).
    load_timeout_s: float = LOAD_TIMEOUT_S
    # How long a replaced or unloaded version may take to finish what reached it.
    drain_timeout_s: float = DRAIN_TIMEOUT_S
    # When a crashed instance comes back (``--backend-config=python,restart-*``).
    crash_policy: CrashPolicy = CrashPolicy()
    restart_backoff: BackoffPolicy = BackoffPolicy()
    restart_after_init_error: bool = False
    # Keep per-request latency summaries (--metrics-config summary_latencies=true).
    latency_summaries: bool = False
    # How long workers poll for their next batch (--busy-poll-worker-us, up to
    # --busy-poll-worker-spare-us while the core is theirs; --busy-poll-us after a batch sent
    # while the server's loop wanted them to poll).
    worker_poll_us: int = 0
    worker_spare_poll_us: int = 0
    hinted_poll_us: int = 0
    # Decoupled models keep the first-response histogram (histogram_latencies=true).
    first_response_histogram: bool = False
    # --backend-config entries (backend, setting, value), handed to the backends' loaders.
    backend_config: tuple[tuple[str, str, str], ...] = ()


@dataclass(slots=True)
class Built:
    """The outcome of one load: the completed config, the versions that loaded and the
    reasons of those that did not."""

    config: dict[str, Any]
    loaded: dict[int, ServedVersion] = field(default_factory=dict)
    failed: dict[int, str] = field(default_factory=dict)


class VersionsBuilder(Protocol):
    """Builds the versions of one model load (the manager's builders: in workers, or an
    ensemble's plan)."""

    async def build(
        self,
        name: str,
        model_dir: Path,
        pb: Any,
        folder: PrivateFolder | None,
        on_selected: Callable[[tuple[int, ...]], None],
    ) -> Built: ...


async def read_config(name: str, model_dir: Path, options: LoadOptions) -> Any:
    """The model's ModelConfig from its folder (an empty one when it has none)."""
    loop = asyncio.get_running_loop()
    pb = await loop.run_in_executor(
        None, cfg.load_config_file, model_dir, name, options.model_config_name
    )
    if pb is None:
        if not options.auto_complete:
            raise Unavailable(
                f"failed to load model '{name}': no model configuration "
                "'config.pbtxt' and auto-complete is disabled"
            )
        pb = cfg.ModelConfig(name=name)
    return pb


class VersionBuilder:
    """Builds versions whose instances run in worker processes.

    ``calls`` answers model code's requests (BLS) in the workers this starts;
    ``workers_poll`` tells whether the instance given a batch now should poll for its next
    one (see ``RequestSpinner.workers_poll`` and ``LoadOptions.hinted_poll_us``)."""

    def __init__(
        self,
        options: LoadOptions,
        calls: CallHandler | None = None,
        workers_poll: Callable[[], bool] | None = None,
        response_store: ResponseStore | None = None,
        rate_limiter: RateLimiter | None = None,
    ) -> None:
        self.options = options
        #: The server's rate limiter (None: --rate-limit=off).
        self.rate_limiter = rate_limiter
        #: The server's response cache (None: no cache configured).
        self.response_store = response_store
        self._starting: set[WorkerProcess] = set()
        self.call_handler = calls
        self.workers_poll = workers_poll

    async def build(
        self,
        name: str,
        model_dir: Path,
        pb: Any,
        folder: PrivateFolder | None,
        on_selected: Callable[[tuple[int, ...]], None],
    ) -> Built:
        """Build every version ``pb``'s policy selects from ``model_dir``. Raises when the
        model as a whole cannot load (no version, bad config); per-version failures are
        in ``Built.failed``."""
        pb = _named(pb, name)
        loop = asyncio.get_running_loop()
        available = await loop.run_in_executor(None, repo.available_versions, model_dir)
        selection = repo.select_versions(pb.version_policy, available)
        if not selection.selected:
            raise Unavailable(
                f"at least one version must be available under the version policy of model '{name}'"
            )
        for number in selection.missing:
            # As Triton: logged, not loaded, and not held against the model's readiness.
            log.error(
                "version %d is specified for model '%s', but the version directory is not present",
                number,
                name,
            )
        on_selected(selection.selected)

        # Auto-complete runs in a worker for the newest version; that worker is then kept
        # as the first instance of that version.
        newest = max(selection.selected)
        # The model's own Python environment, unpacked and checked before any worker starts.
        python = await loop.run_in_executor(None, prepare, model_dir, cfg.config_to_json(pb))
        # The first worker becomes the first instance: it imports model.py in that
        # instance's device environment (``tritium.device_env``).
        first_env = _first_instance_env(pb, name, self.options.gpu_count)
        first = self._new_process(f"{name}:{newest}", python, first_env)
        try:
            await first.spawn()
            spec = _load_spec(name, model_dir, newest, cfg.config_to_json(pb), self.options)
            spec["auto_complete"] = self.options.auto_complete
            reply = await self._timed(first.load(spec, self.options.load_timeout_s), name, "load")
            if reply.get("config") is not None:
                pb = cfg.config_from_dict(reply["config"])
            pb = cfg.complete_config(pb, name, gpu_count=self.options.gpu_count)
            cfg.validate_config(pb, name, gpu_count=self.options.gpu_count)
            config = cfg.config_to_json(pb)
            labels = await asyncio.get_running_loop().run_in_executor(
                None, read_labels, model_dir, config
            )
        except BaseException:
            await self._discard(first)
            raise
        built = Built(config)
        spare: list[WorkerProcess] = [first]

        async def load_version(number: int) -> None:
            try:
                loaded = await self._start_version(
                    name, model_dir, number, config, spare, folder, labels, python
                )
            except TritiumError as exc:
                built.failed[number] = exc.message
                return
            try:
                await warm_up(loaded, model_dir, self.options.load_timeout_s)
            except TritiumError as exc:
                await loaded.stop(1.0, "failed to warm up")
                built.failed[number] = exc.message
                return
            built.loaded[number] = loaded

        try:
            await asyncio.gather(*(load_version(n) for n in selection.selected))
        finally:
            for process in spare:
                await self._discard(process)
        return built

    def _new_process(
        self,
        label: str,
        python: WorkerPython | None = None,
        env: tuple[tuple[str, str], ...] = (),
    ) -> WorkerProcess:
        process = WorkerProcess(
            label,
            env={**os.environ, **dict(env)} if env else None,
            python=python,
            calls=self.call_handler,
            poll_us=self.options.worker_poll_us,
            spare_poll_us=self.options.worker_spare_poll_us,
            hinted_poll_us=self.options.hinted_poll_us if self.workers_poll is not None else 0,
            poll_hint=self.workers_poll,
        )
        process.device_env = env
        self._starting.add(process)
        return process

    async def _discard(self, process: WorkerProcess) -> None:
        try:
            await process.stop(1.0)
        finally:
            self._starting.discard(process)

    async def _timed(self, call: Any, label: str, what: str) -> Any:
        try:
            return await call
        except asyncio.TimeoutError:
            step = "initialize()" if what == "initialize" else "loading model.py"
            raise Unavailable(
                f"{step} of '{label}' did not finish within {self.options.load_timeout_s:g} s"
            ) from None

    async def _start_version(
        self,
        name: str,
        model_dir: Path,
        version: int,
        config: dict[str, Any],
        spare: list[WorkerProcess],
        folder: PrivateFolder | None,
        labels: Mapping[str, Labels],
        python: WorkerPython | None = None,
    ) -> LoadedVersion:
        timeout = self.options.load_timeout_s
        label = f"{name}:{version}"

        async def starter(instance: ModelInstance) -> WorkerProcess:
            process: WorkerProcess | None = None
            spec = instance.spec
            if spare and spare[0].label == label and spare[0].alive:
                if spare[0].device_env == spec.env:
                    process = spare.pop()
            try:
                if process is None:
                    process = self._new_process(label, python, spec.env)
                    await process.spawn()
                    load = _load_spec(name, model_dir, version, config, self.options)
                    await self._timed(process.load(load, timeout), label, "load")
                await self._timed(
                    process.initialize(instance.init_message(config), timeout),
                    instance.name,
                    "initialize",
                )
            except BaseException:
                if process is not None:
                    await self._discard(process)
                raise
            self._starting.discard(process)
            # From now on it is this instance: its messages name it as every other does.
            process.label = instance.name
            # Triton's instance-initialize line, with the environment tritium set for it.
            log.info(
                "TRITONBACKEND_ModelInstanceInitialize: %s",
                describe(InstanceDevice(spec.name, spec.kind, spec.device_id, spec.env)),
            )
            return process

        initial_states = None
        if "sequence_batching" in config:  # initial state files are read off the loop
            initial_states = await asyncio.get_running_loop().run_in_executor(
                None, load_initial_states, config, model_dir
            )
        stats = SummarizedStatistics(now_ns) if self.options.latency_summaries else ModelStatistics()
        opts = self.options
        restarts = RestartPolicy(
            opts.restart_backoff, opts.crash_policy, opts.restart_after_init_error
        )
        plan = instance_plan(config)
        instances = [ModelInstance(spec, starter, stats, restarts) for spec, _ in plan]
        limiter = self.rate_limiter
        runners = None
        if limiter is not None:
            # Before any worker starts: the resources listed may not be enough (refused
            # with Triton's reason).
            runners = limiter.register(
                [(i, limits, i.spec.device_id) for i, (_, limits) in zip(instances, plan)]
            )
        results = await asyncio.gather(*(i.start() for i in instances), return_exceptions=True)
        errors = [r for r in results if isinstance(r, BaseException)]
        if errors:
            if limiter is not None and runners is not None:
                limiter.unregister(runners)
            await asyncio.gather(*(i.stop(1.0) for i in instances))
            first = errors[0]
            if isinstance(first, TritiumError):
                raise first
            raise Unavailable(f"failed to load model '{name}': {first}")
        loaded = LoadedVersion(
            name,
            version,
            config,
            instances,
            stats,
            folder,
            initial_states,
            labels,
            limiter=limiter,
            runners=runners,
        )
        loaded.cache = cache_for(
            self.response_store,
            config,
            stats,
            name,
            loaded.version_str,
            frozenset(loaded.signature.outputs),
        )
        if self.options.first_response_histogram and loaded.decoupled:
            loaded.first_response = LatencyHistogram(first_response_buckets(config))
        return loaded

    def kill_all(self) -> None:
        """Last resort at exit: workers of loads still in progress."""
        for process in list(self._starting):
            process.kill()
        self._starting.clear()


def _first_instance_env(pb: Any, name: str, gpu_count: int) -> tuple[tuple[str, str], ...]:
    """The device environment of the model's first instance, from its configuration as
    read (instance groups defaulted); () when it has none or the parameters are invalid
    (validation reports them after auto-complete)."""
    try:
        completed = cfg.complete_config(pb, name, gpu_count=gpu_count)
        instances = instance_devices(cfg.config_to_json(completed))
    except (DeviceParameterError, ValueError, KeyError):
        return ()
    return instances[0].env if instances else ()


def _named(pb: Any, name: str) -> Any:
    """An override config without a name takes the model's (one with another name is
    refused by validation)."""
    if not pb.name:
        pb = cfg.ModelConfig.FromString(pb.SerializeToString())
        pb.name = name
    return pb


def _load_spec(
    name: str, model_dir: Path, version: int, config: dict[str, Any], options: LoadOptions
) -> dict[str, Any]:
    return {
        "model_name": name,
        "model_version": str(version),
        "model_dir": str(model_dir),
        "config": config,
        "auto_complete": False,
        "log_verbose": options.log_verbose,
        "backend_config": [list(entry) for entry in options.backend_config],
    }
