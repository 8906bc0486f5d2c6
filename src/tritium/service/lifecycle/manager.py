"""The models of the repository: load, reload and unload them while requests flow.

Each model is an entry whose ``versions`` map (version -> status, with the serving
``ServedVersion``) is what requests read. A load builds every selected version beside
whatever serves now (config read, auto-completed in a worker, validated, every instance
started and warmed up) and then replaces the map in one assignment: on the event loop no
request sees half of a change. Versions that were replaced or unloaded are retired: what
reached them finishes, then their workers stop. A load that fails leaves what served before
serving, with the reason in the index. Loads and unloads of one model are serialized.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Collection, Coroutine
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

from tritium import repository as repo
from tritium.core.errors import InvalidArgument, NotFound, TritiumError
from tritium.repository.fingerprint import Fingerprint, model_fingerprint
from tritium.repository.overrides import LoadOverride, PrivateFolder, write_private_folder
from tritium.service.lifecycle.builder import (
    Built,
    LoadOptions,
    VersionBuilder,
    VersionsBuilder,
    read_config,
)
from tritium.service.lifecycle.dependencies import is_ensemble, model_dependencies
from tritium.service.lifecycle.folders import find, folder_names, scan
from tritium.service.lifecycle.remotes import RemoteCopies
from tritium.service.lifecycle.swap import keep_serving, swap_versions
from tritium.service.model.entry import (
    UNAVAILABLE,
    UNLOADED,
    UNLOADING,
    ModelEntry,
    VersionStatus,
    index_lines,
    table_rows,
)
from tritium.service.model.interface import ServedVersion
from tritium.service.model.table import ModelTable
from tritium.workers import ModelInstance

log = logging.getLogger("tritium.models")

STOP_TIMEOUT_S = 30.0
# At shutdown, how long a model whose load or unload is running is waited for when the
# deadline has already passed.
_LOCK_GRACE_S = 0.05

T = TypeVar("T")


class ModelManager:
    """Loads, reloads and unloads the models of ``roots`` into ``table``.

    Given its builders: ``versions`` builds a model's versions in worker processes,
    ``ensembles`` an ensemble's (chosen by the model's config). ``remotes`` are the local
    copies of cloud repositories among ``roots``: a load syncs the model's folder first."""

    def __init__(
        self,
        roots: list[Path],
        options: LoadOptions,
        table: ModelTable,
        versions: VersionBuilder,
        ensembles: VersionsBuilder,
        remotes: RemoteCopies | None = None,
    ) -> None:
        self.roots = roots
        self.remotes = remotes if remotes is not None else RemoteCopies()
        self.options = options
        self.table = table
        self.models = table.models
        self._builder = versions
        self._ensembles = ensembles
        self._background: set[asyncio.Task[Any]] = set()

    # -- queries ------------------------------------------------------------------------

    def table_rows(self) -> list[tuple[str, str, str]]:
        """Rows of the start-up model table: (model, version, status)."""
        return table_rows(self.models)

    def index_entries(
        self, folder_names: Collection[str], ready_only: bool
    ) -> list[dict[str, Any]]:
        """Triton's repository index over ``folder_names`` and every known model."""
        return index_lines(self.models, folder_names, ready_only)

    async def folder_names(self) -> list[str]:
        """The model folders of the repositories, duplicates included."""
        return await folder_names(self.roots)

    # -- loading ------------------------------------------------------------------------

    async def load_all(self, only: Collection[str] | None = None) -> None:
        """Load every model of the repositories (or just ``only``, for explicit control)."""
        try:
            sources = await scan(self.roots)
        except repo.DuplicateModelError as exc:
            sources = exc.models
            for name in exc.duplicates:
                entry = self._entry(name)
                entry.wanted = True
                entry.state, entry.reason = UNAVAILABLE, repo.DUPLICATE_REASON
        if only is not None:
            for name in sorted(set(only) - set(sources)):
                if name in self.models:
                    continue
                entry = self._entry(name)
                entry.wanted = True
                entry.state = UNAVAILABLE
                entry.reason = f"failed to load '{name}', failed to poll from model repository"
            sources = {name: src for name, src in sources.items() if name in only}
        results = await asyncio.gather(
            *(self._load_named(name, None, (), retry=True) for name in sorted(sources)),
            return_exceptions=True,
        )
        for result in results:
            if isinstance(result, BaseException) and not isinstance(result, TritiumError):
                raise result

    async def load(self, name: str, override: LoadOverride | None = None) -> None:
        """Load ``name``, or reload it when it is loaded (the repository API's load).

        Raises InvalidArgument when the new load failed (what served before still serves):
        Triton's "load failed for model ..." text when versions failed, "failed to load
        '<name>': ..." when the model as a whole did; NotFound when it is in no repository.
        The repository API puts ``failed to load '<name>'`` before any reason lacking it."""
        if override is None or not override.files:
            await self.remotes.sync_model(name)
        await self._run(self._load_named(name, override, (), retry=True))

    async def refresh(self, name: str) -> None:
        """Load ``name`` if its folder changed since its last load attempt (poll mode)."""
        await self._run(self._load_named(name, None, (), retry=False))

    async def unload(self, name: str, unload_dependents: bool = False) -> None:
        """Unload every version of ``name``: requests that reached it finish first."""
        await self._run(self._unload_named(name, unload_dependents))

    async def _run(self, work: Coroutine[Any, Any, T]) -> T:
        # A client that goes away must not cancel a load or unload halfway.
        task = asyncio.ensure_future(work)
        self._track(task)
        return await asyncio.shield(task)

    def _track(self, task: asyncio.Task[Any]) -> None:
        self._background.add(task)
        task.add_done_callback(_forget(self._background))

    def _entry(self, name: str) -> ModelEntry:
        entry = self.models.get(name)
        if entry is None:
            entry = self.models[name] = ModelEntry(name)
        return entry

    async def _load_named(
        self, name: str, override: LoadOverride | None, chain: tuple[str, ...], *, retry: bool
    ) -> None:
        if name in chain:
            raise InvalidArgument(
                f"circular dependency between models: {' -> '.join((*chain, name))}"
            )
        with_files = override is not None and bool(override.files)
        source = None if with_files else await find(self.roots, name)
        entry = self._entry(name)
        async with entry.lock:
            entry.wanted = True
            if source is not None:
                entry.source = source
            await self._load_locked(entry, source, override, (*chain, name), retry)

    async def _load_locked(
        self,
        entry: ModelEntry,
        source: repo.ModelSource | None,
        override: LoadOverride | None,
        chain: tuple[str, ...],
        retry: bool,
    ) -> None:
        loop = asyncio.get_running_loop()
        name = entry.name
        folder: PrivateFolder | None = None
        stamp: Fingerprint | None = None
        chosen: list[int] = []
        try:
            if source is None:
                assert override is not None
                folder = await loop.run_in_executor(None, write_private_folder, name, override)
                folder.acquire()  # held until the versions built from it hold it
                model_dir = folder.path
            else:
                model_dir = source.path
                stamp = await loop.run_in_executor(None, model_fingerprint, model_dir)
                same = override is None and not entry.overridden and entry.model_dir == model_dir
                if retry:
                    # The API reloads unless what serves came from these very files.
                    skip = same and entry.stamp == stamp and entry.has_loaded()
                    skip = skip and not entry.load_error
                else:
                    # A poll tries a folder once per change, failed or not.
                    skip = same and entry.attempted == stamp
                if skip:
                    return
            try:
                pb = override.config if override is not None else None
                if pb is None:
                    pb = await read_config(name, model_dir, self.options)
                for dependency in model_dependencies(pb):
                    await self._ensure_loaded(dependency, chain)
                built = await self._build(entry, model_dir, pb, folder, chosen)
            except TritiumError as exc:
                # Said once: "failed to load 'x': failed to load model 'x': ..." is noise.
                reason = exc.message.removeprefix(f"failed to load model '{name}': ")
                log.error("failed to load '%s': %s", name, reason)
                failed = dict.fromkeys(chosen, reason)
                keep_serving(entry, reason, model_dir, stamp, override is not None, failed)
                raise InvalidArgument(f"failed to load '{name}': {reason}") from None
            for v, reason in sorted(built.failed.items()):
                log.error("failed to load '%s' version %d: %s", name, v, reason)
            if built.loaded:
                log.info("successfully loaded '%s'", name)
            text = "".join(
                f"version {v} is at UNAVAILABLE state: {reason};"
                for v, reason in sorted(built.failed.items())
            )
            if not built.loaded and entry.has_loaded():
                # Nothing of the change loaded: what served keeps serving, whole.
                keep_serving(entry, text, model_dir, stamp, override is not None, built.failed)
            else:
                self._swap(entry, built, model_dir, stamp, override is not None)
            if built.failed:
                raise InvalidArgument(f"load failed for model '{name}': {text}")
        finally:
            if folder is not None:
                folder.release()

    async def _ensure_loaded(self, name: str, chain: tuple[str, ...]) -> None:
        entry = self.models.get(name)
        if entry is not None and entry.has_loaded():
            return
        await self.remotes.sync_model(name)
        try:
            await self._load_named(name, None, chain, retry=True)
        except NotFound:
            # In no repository: the dependent's own check names the missing model (an
            # ensemble: "contains models that are not available", as Triton says).
            return

    async def _build(
        self,
        entry: ModelEntry,
        model_dir: Path,
        pb: Any,
        folder: PrivateFolder | None,
        chosen: list[int],
    ) -> Built:
        """Build the versions the policy selects; ``chosen`` gets their numbers as soon
        as they are known (a failed load lists them with its reason)."""
        entry.loading = ()

        def selected(versions: tuple[int, ...]) -> None:
            chosen.extend(versions)
            entry.loading = versions
            for version in versions:
                log.info("loading: %s:%d", entry.name, version)

        try:
            builder = self._ensembles if is_ensemble(pb) else self._builder
            return await builder.build(entry.name, model_dir, pb, folder, selected)
        finally:
            entry.loading = ()

    def _swap(
        self,
        entry: ModelEntry,
        built: Built,
        model_dir: Path,
        stamp: Fingerprint | None,
        overridden: bool,
    ) -> None:
        """Put the built versions in service; watch them; retire what they replace."""
        retired = swap_versions(entry, built, model_dir, stamp, overridden)
        for loaded in built.loaded.values():
            loaded.watch(partial(self._instance_gave_up, entry, loaded))
        for loaded in retired:
            self._retire_later(loaded, "was replaced by a newer load")

    def _retire_later(self, loaded: ServedVersion, reason: str) -> None:
        task = asyncio.ensure_future(self._retire(loaded, self.options.drain_timeout_s, reason))
        self._track(task)

    async def _retire(self, loaded: ServedVersion, timeout: float, reason: str) -> None:
        await loaded.retire(timeout, reason)
        log.info("successfully unloaded '%s' version %d", loaded.name, loaded.version)

    def _instance_gave_up(
        self, entry: ModelEntry, loaded: ServedVersion, instance: ModelInstance, reason: str
    ) -> None:
        """Supervision: a version whose instance stopped restarting is taken out of service
        and its queued requests fail at once, naming the model."""
        status = entry.versions.get(loaded.version)
        if status is None or status.loaded is not loaded:
            return
        versions = dict(entry.versions)
        versions[loaded.version] = VersionStatus(loaded.version, UNAVAILABLE, reason)
        entry.versions = versions
        if not entry.has_loaded():
            entry.state, entry.reason = UNAVAILABLE, reason
        task = asyncio.ensure_future(loaded.stop(STOP_TIMEOUT_S, f"is unavailable: {reason}"))
        self._track(task)

    # -- unloading ----------------------------------------------------------------------

    async def _unload_named(self, name: str, unload_dependents: bool) -> None:
        entry = self.models.get(name)
        if entry is None:
            return
        async with entry.lock:
            dependencies = model_dependencies_of(entry)
            await self._unload_locked(entry)
        if unload_dependents:
            for dependency in dependencies:
                if not self._needed_by_others(dependency):
                    await self._unload_named(dependency, True)

    async def _unload_locked(self, entry: ModelEntry, timeout: float | None = None) -> None:
        entry.wanted = False
        loaded = [s.loaded for s in entry.versions.values() if s.loaded is not None]
        entry.versions = {
            v: VersionStatus(v, UNLOADING) if s.loaded is not None else s
            for v, s in entry.versions.items()
        }
        drain = self.options.drain_timeout_s if timeout is None else timeout
        await asyncio.gather(*(self._retire(lv, drain, "is unloading") for lv in loaded))
        entry.versions = {
            v: VersionStatus(v, UNAVAILABLE, UNLOADED) if s.state == UNLOADING else s
            for v, s in entry.versions.items()
        }
        entry.state, entry.reason = UNAVAILABLE, UNLOADED
        entry.stamp = entry.attempted = None
        entry.load_error = ""

    def _needed_by_others(self, name: str) -> bool:
        for other in self.models.values():
            if other.name != name and other.has_loaded():
                if name in model_dependencies_of(other):
                    return True
        return False

    # -- shutdown -----------------------------------------------------------------------

    async def unload_all(self, timeout: float = STOP_TIMEOUT_S) -> None:
        async def unload(entry: ModelEntry) -> None:
            if entry.lock.locked():
                try:
                    await asyncio.wait_for(entry.lock.acquire(), max(timeout, _LOCK_GRACE_S))
                except asyncio.TimeoutError:
                    return  # a load still running: kill_all ends it
            else:
                await entry.lock.acquire()  # free: taken at once, even with no time left
            try:
                await self._unload_locked(entry, timeout)
            finally:
                entry.lock.release()

        await asyncio.gather(
            *(unload(e) for e in list(self.models.values())), return_exceptions=True
        )
        pending = [t for t in self._background if not t.done()]
        if pending:
            await asyncio.wait(pending, timeout=timeout)

    def kill_all(self) -> None:
        for loaded in list(self.table.loaded()):
            loaded.kill()
        self._builder.kill_all()


def model_dependencies_of(entry: ModelEntry) -> list[str]:
    return model_dependencies(entry.config) if entry.config is not None else []


def _forget(tasks: set[asyncio.Task[Any]]) -> Any:
    def done(task: asyncio.Task[Any]) -> None:
        tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            exc = task.exception()
            if not isinstance(exc, TritiumError):
                log.error("model operation failed", exc_info=exc)

    return done
