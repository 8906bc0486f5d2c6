"""Arenas that several workers map: one worker's outputs read in place by the next.

An ensemble step's outputs can stay where its worker wrote them: in a *shared* arena the
server lent that worker for the batch (instead of its one output arena, which the next
batch overwrites). The server's arrays over it are views of a :func:`block`, and an array
that is such a view can be handed to another worker as a *reference* (arena id, offset)
instead of being copied into that worker's input arena; each worker maps a shared arena
once (its memfd sent over the descriptor socket) and keeps it by id until told to unmap.

``KEEP_MIN_BYTES`` is where this starts to pay: below it the two copies (out of the
arena, into the next worker's) cost less than the bookkeeping (a block, a finalizer, a
mapped arena, longer messages), measured by ``bench/shared_steps.py``.
"""

from __future__ import annotations

import ctypes
import itertools
from typing import Any, Protocol

import numpy as np

from tritium.ipc.arena import Arena

#: A batch's outputs stay in a shared arena only from this many bytes on (and an input
#: travels as a reference from this many bytes on); smaller ones are copied.
KEEP_MIN_BYTES = 128 << 10

_ids = itertools.count(1)


class Reader(Protocol):
    """A worker that mapped a shared arena and must hear when it goes away."""

    def forget(self, arena_id: int) -> None: ...


class SharedArena(Arena):
    """An arena with a server-wide id, and the workers that mapped it."""

    __slots__ = ("id", "readers")

    def __init__(self, fd: int, size: int) -> None:
        super().__init__(fd, size)
        self.id = next(_ids)
        self.readers: set[Reader] = set()

    def close(self) -> None:
        """Close it here and have every worker that mapped it unmap it (between batches);
        arrays still viewing it keep its pages until they are dropped."""
        readers, self.readers = self.readers, set()
        for reader in readers:
            reader.forget(self.id)
        super().close()


def block(arena: SharedArena) -> Any:
    """A buffer over the whole arena that arrays are made as views of: it stays alive
    exactly as long as one of them does (numpy keeps it as their ``base``), so a finalizer
    on it says when the arena is free again. It knows its arena (``.arena``)."""
    assert arena.buf is not None
    view = (ctypes.c_ubyte * arena.size).from_buffer(arena.buf)
    view.arena = arena  # type: ignore[attr-defined]
    return view


def reference(array: np.ndarray) -> tuple[SharedArena, int] | None:
    """(arena, offset) of ``array`` when it is a contiguous view of a live shared arena's
    :func:`block`, else None."""
    base = array.base
    while isinstance(base, np.ndarray):  # a view of a view (numpy keeps the chain)
        base = base.base
    arena = getattr(base, "arena", None)
    if type(arena) is not SharedArena or arena.buf is None or not array.flags.c_contiguous:
        return None
    offset = array.__array_interface__["data"][0] - ctypes.addressof(base)  # type: ignore[arg-type]
    return arena, offset
