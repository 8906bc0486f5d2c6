"""The model manager and service run in a test's own process, without sockets.

``serving(repositories, models)`` loads ``models`` (none: nothing, as in explicit model
control) and yields ``(manager, service)`` (``options=LoadOptions(...)`` sets how models
load and restart); whatever happens, every model is unloaded and
every worker killed afterwards. ``open_fds(kind)`` counts this process's file descriptors
whose link names ``kind`` (``memfd:tritium-arena``, ``timerfd``), for tests that check
that nothing is left open.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from tritium.server.app import build_service
from tritium.service import LoadOptions, ModelManager, Service


@asynccontextmanager
async def serving(
    repositories: Iterable[Path],
    models: Iterable[str] = (),
    load_options: LoadOptions | None = None,
    **service_options: Any,
) -> AsyncIterator[tuple[ModelManager, Service]]:
    options = load_options if load_options is not None else LoadOptions()
    wiring = build_service(list(repositories), options, **service_options)
    manager, service = wiring.manager, wiring.service
    try:
        wanted = set(models)
        if wanted:
            await manager.load_all(wanted)
        service.started = True
        yield manager, service
    finally:
        try:
            await manager.unload_all(5.0)
        finally:
            manager.kill_all()


def open_fds(kind: str) -> int:
    """This process's open file descriptors whose link contains ``kind`` (Linux)."""
    count = 0
    for name in os.listdir("/proc/self/fd"):
        try:
            count += kind in os.readlink(f"/proc/self/fd/{name}")
        except OSError:
            pass  # closed meanwhile (the listing's own descriptor among them)
    return count
