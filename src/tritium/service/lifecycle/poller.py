"""Poll mode (``--model-control-mode=poll``): rescan the repositories every interval and
load added models, reload changed ones and unload removed ones.

A change that fails to load leaves the version that served before serving, with the
reason in the repository index; the folder is tried again once it changes again. Cloud
repositories' copies are synced first; a poll whose store cannot be read changes nothing
(it would otherwise unload every model of that store) and the next one tries again.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from tritium import repository as repo
from tritium.core.errors import TritiumError
from tritium.service.lifecycle.manager import ModelManager

log = logging.getLogger("tritium.models")


class RepositoryPoller:
    def __init__(self, models: ModelManager, interval_s: float) -> None:
        self.models = models
        self.interval_s = interval_s
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        if self._task is None and self.interval_s > 0:
            self._task = asyncio.ensure_future(self._run())

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self.interval_s)
            try:
                await self.poll_once()
            except Exception:  # noqa: BLE001 - one bad scan must not end polling
                log.exception("polling the model repository failed")

    async def poll_once(self) -> None:
        """One scan: unload what disappeared, then load what was added or changed."""
        models = self.models
        loop = asyncio.get_running_loop()
        try:
            await models.remotes.sync()
        except repo.RepositoryError as exc:
            log.error("failed to poll the model repository: %s", exc.message)
            return
        try:
            sources = await loop.run_in_executor(None, repo.scan_repositories, models.roots)
        except repo.DuplicateModelError as exc:
            sources = exc.models
            for name in exc.duplicates:
                log.error(
                    "failed to poll model '%s': not unique across all model repositories", name
                )
        removed = [
            name for name, entry in models.models.items() if entry.wanted and name not in sources
        ]
        for name in removed:
            log.info("model '%s' was removed from the repository; unloading", name)
            await models.unload(name)
        results = await asyncio.gather(
            *(models.refresh(name) for name in sorted(sources)), return_exceptions=True
        )
        for name, result in zip(sorted(sources), results):
            if isinstance(result, TritiumError):
                # The manager has logged the failed load with its reason.
                log.debug("poll: %s", result.message)
            elif isinstance(result, BaseException):
                log.error("poll of model '%s' failed", name, exc_info=result)
