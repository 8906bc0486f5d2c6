"""The model folders of the repositories, read off the event loop."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

from tritium import repository as repo
from tritium.core.errors import InvalidArgument, NotFound


async def folder_names(roots: list[Path]) -> list[str]:
    """The model folders of the repositories, duplicates included."""

    def scan_names() -> list[str]:
        names: set[str] = set()
        for root in roots:
            try:
                for item in os.scandir(root):
                    if not item.name.startswith(".") and item.is_dir():
                        names.add(item.name)
            except OSError:
                continue
        return sorted(names)

    return await asyncio.get_running_loop().run_in_executor(None, scan_names)


async def scan(roots: list[Path]) -> dict[str, repo.ModelSource]:
    """Every model of the repositories (raises ``repo.DuplicateModelError``)."""
    loop = asyncio.get_running_loop()
    return await loop.run_in_executor(None, repo.scan_repositories, roots)


async def find(roots: list[Path], name: str) -> repo.ModelSource:
    """The folder of ``name`` in the repositories (one of them)."""

    def find_dirs() -> list[Path]:
        return [root / name for root in roots if (root / name).is_dir()]

    found = await asyncio.get_running_loop().run_in_executor(None, find_dirs)
    if not found:
        # Triton's text, with Triton core's NOT_FOUND: the client named a model that is
        # in no repository (a 4xx, not a server fault).
        raise NotFound(f"failed to load '{name}', failed to poll from model repository")
    if len({p.resolve() for p in found}) > 1:
        raise InvalidArgument(f"failed to load '{name}': {repo.DUPLICATE_REASON}")
    return repo.ModelSource(name, found[0], found[0].parent)
