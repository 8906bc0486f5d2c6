"""The cloud repositories' local copies, synced off the event loop before they are read.

Start-up syncs every copy (a store that cannot be read fails start-up); each poll syncs
them before its scan; a repository-API load syncs the model's own folder first, so a
model uploaded after start-up loads, and one changed in the store reloads.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from tritium.core.errors import Unavailable
from tritium.repository.remote import RemoteRepository
from tritium.repository.scan import RepositoryError


class RemoteCopies:
    """The copies of a server's cloud repositories (none for local folders only)."""

    def __init__(self, remotes: Sequence[RemoteRepository] = ()) -> None:
        self.remotes = tuple(remotes)

    def __bool__(self) -> bool:
        return bool(self.remotes)

    async def sync(self, prefix: str = "") -> bool:
        """Sync every copy (or only its ``prefix`` folder); True when a file changed.
        Raises ``RepositoryError`` (one line, naming the location) for the first store
        that cannot be read; the copies synced before it keep their new files."""
        loop = asyncio.get_running_loop()
        changed = False
        for remote in self.remotes:
            changed |= await loop.run_in_executor(None, remote.sync, prefix)
        return changed

    async def sync_model(self, name: str) -> None:
        """Bring the copies of the model folder ``name`` up to date before it loads;
        Unavailable when a store cannot be read (what serves keeps serving)."""
        if self.remotes:
            try:
                await self.sync(name)
            except RepositoryError as exc:
                raise Unavailable(f"failed to load '{name}': {exc.message}") from None

    def close(self) -> None:
        """Remove the temporary copies."""
        for remote in self.remotes:
            remote.close()
