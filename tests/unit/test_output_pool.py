"""A worker's pool of shared output arenas: lending, giving back, bounds, closing."""

from __future__ import annotations

import gc

import numpy as np

from tritium.ipc.shared_arenas import SharedArena, reference
from tritium.workers import output_pool
from tritium.workers.output_pool import MAX_ARENAS, OutputPool


class Reader:
    def __init__(self) -> None:
        self.forgotten: list[int] = []

    def forget(self, arena_id: int) -> None:
        self.forgotten.append(arena_id)


def _pool(made: list[SharedArena]) -> OutputPool:
    def new(size: int) -> SharedArena:
        made.append(SharedArena.create(size))
        return made[-1]

    return OutputPool(new)


def test_an_arena_is_lent_again_once_the_last_view_of_its_outputs_is_gone():
    made: list[SharedArena] = []
    pool = _pool(made)
    arena = pool.offer()
    assert arena is not None
    block = pool.keep(arena, 64)
    out = np.ndarray((4,), np.float32, block, 0)
    derived = out.reshape(2, 2)[1:]
    del block, out
    gc.collect()
    assert reference(derived) == (arena, 8)  # a view knows where it lies
    other = pool.offer()
    assert other is not None and other is not arena  # still viewed: not lent
    pool.give_back(other)
    del derived
    gc.collect()
    assert {pool.offer().id, pool.offer().id} == {arena.id, other.id}  # type: ignore[union-attr]
    assert pool.statistics().kept_batches == 1
    pool.close()


def test_at_most_max_arenas_are_made_then_batches_are_copied():
    made: list[SharedArena] = []
    pool = _pool(made)
    blocks = [pool.keep(a, 1) for a in [pool.offer() for _ in range(MAX_ARENAS)]]  # type: ignore[arg-type]
    assert pool.offer() is None
    assert len(made) == MAX_ARENAS
    del blocks
    gc.collect()
    assert pool.offer() is not None
    pool.close()


def test_growing_past_the_byte_bound_gives_the_arena_back(monkeypatch):
    monkeypatch.setattr(output_pool, "MAX_BYTES", 4 << 20)
    made: list[SharedArena] = []
    pool = _pool(made)
    arena = pool.offer()
    assert arena is not None
    bigger = pool.grow(arena, 3 << 20)
    assert bigger is not None and bigger.size == 4 << 20 and arena.fd == -1  # replaced
    assert pool.grow(bigger, 5 << 20) is None
    assert pool.offer() is bigger  # given back, not lost
    assert pool.statistics().bytes == 4 << 20
    pool.close()


def test_closing_closes_every_arena_and_tells_its_readers():
    made: list[SharedArena] = []
    pool = _pool(made)
    arena = pool.offer()
    assert arena is not None
    reader = Reader()
    arena.readers.add(reader)
    view = np.ndarray((2,), np.uint8, pool.keep(arena, 2), 0)
    view[:] = 7
    pool.close()
    assert reader.forgotten == [arena.id]
    assert all(a.fd == -1 for a in made)
    assert list(view) == [7, 7]  # the server's arrays stay readable until dropped
    assert reference(view) is None  # but are not handed on by reference any more
