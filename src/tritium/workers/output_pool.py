"""A worker's pool of shared output arenas, for batches whose outputs should stay put.

The server lends a free arena of the pool to a batch of ensemble steps (the exec
message names it); when the worker writes the outputs there, the server's arrays are
views of it and the arena is taken until the last of them is dropped (a finalizer on
their common :func:`~tritium.ipc.shared_arenas.block` gives it back). Bounded: at most
``MAX_ARENAS`` arenas and ``MAX_BYTES`` bytes per worker; with none free, or a batch
that would pass the bound, the batch takes the ordinary copy path. Everything is closed
with the worker (crash, restart, unload, stop); arrays still viewing an arena keep its
pages, not the pool, alive.
"""

from __future__ import annotations

import weakref
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tritium.ipc import grow_size
from tritium.ipc.shared_arenas import SharedArena, block

MAX_ARENAS = 4
MAX_BYTES = 256 << 20
_INITIAL = 1 << 20


@dataclass(frozen=True, slots=True)
class OutputPoolStatistics:
    arenas: int
    bytes: int
    # Batches whose outputs stayed in a pool arena, and their bytes.
    kept_batches: int
    kept_bytes: int


class OutputPool:
    def __init__(self, new_arena: Callable[[int], SharedArena | None]) -> None:
        # Makes an arena of a size and maps it into the worker (None: it cannot).
        self._new_arena = new_arena
        self._arenas: dict[int, SharedArena] = {}
        # Appended to by finalizers, from whichever thread drops the last view.
        self._free: deque[SharedArena] = deque()
        self._bytes = 0
        self._kept_batches = 0
        self._kept_bytes = 0

    def statistics(self) -> OutputPoolStatistics:
        return OutputPoolStatistics(
            len(self._arenas), self._bytes, self._kept_batches, self._kept_bytes
        )

    def offer(self) -> SharedArena | None:
        """A free arena to lend the next batch, or None."""
        arenas = self._arenas
        free = self._free
        while free:
            arena = free.pop()
            if arenas.get(arena.id) is arena:
                return arena
        if len(arenas) >= MAX_ARENAS or self._bytes + _INITIAL > MAX_BYTES:
            return None
        return self._add(_INITIAL)

    def grow(self, arena: SharedArena, needed: int) -> SharedArena | None:
        """A bigger arena in place of the lent ``arena`` (which goes), or None (it is
        given back) when that would pass the byte bound."""
        size = grow_size(needed, _INITIAL)
        if self._bytes - arena.size + size > MAX_BYTES:
            self._free.append(arena)
            return None
        self._remove(arena)
        return self._add(size)

    def give_back(self, arena: SharedArena) -> None:
        """The batch did not keep its outputs in ``arena``."""
        self._free.append(arena)

    def keep(self, arena: SharedArena, end: int) -> Any:
        """The block the batch's outputs are views of: ``arena`` is free again once the
        block is gone."""
        view = block(arena)
        weakref.finalize(view, self._free.append, arena).atexit = False
        self._kept_batches += 1
        self._kept_bytes += end
        return view

    def close(self) -> None:
        arenas = list(self._arenas.values())
        self._arenas.clear()
        self._free.clear()
        self._bytes = 0
        for arena in arenas:
            arena.close()

    def _add(self, size: int) -> SharedArena | None:
        arena = self._new_arena(size)
        if arena is not None:
            self._arenas[arena.id] = arena
            self._bytes += arena.size
        return arena

    def _remove(self, arena: SharedArena) -> None:
        if self._arenas.pop(arena.id, None) is not None:
            self._bytes -= arena.size
        arena.close()
