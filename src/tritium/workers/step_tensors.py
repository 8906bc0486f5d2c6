"""The server's half of ensemble step tensors in shared memory, for one worker.

A batch with ensemble steps (:attr:`InferRequest.ensemble_step`) goes through
:meth:`StepTensors.write` instead of the ordinary exec message: inputs that another step's
worker left in a shared arena, and that only this step reads, travel as references
(arena id, offset) that the worker reads in place, after it mapped the arena once; and
the worker is lent a free arena of this worker's :class:`OutputPool` for its outputs.
When the reply says it kept them there, :meth:`kept` gives the block the responses'
arrays are views of. See ``tritium.ipc.shared_arenas`` for the threshold.

Everything here runs on the event loop, between ``WorkerProcess.submit`` and the reply.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tritium.core import InferRequest
from tritium.ipc import Arena, send_fd
from tritium.ipc.messages import Continue, NewArena, Result, ToWorker, Unmap
from tritium.ipc.shared_arenas import KEEP_MIN_BYTES, SharedArena, reference
from tritium.workers.batch_messages import write_batch
from tritium.workers.output_pool import OutputPool, OutputPoolStatistics

_MAX_MAPPED = 64  # shared arenas (its own and other workers') one worker maps at most


def has_steps(batch: list[InferRequest]) -> bool:
    for request in batch:
        if request.ensemble_step:
            return True
    return False


class StepTensors:
    def __init__(
        self,
        send: Callable[[ToWorker], None],
        post: Callable[[ToWorker], None],
        fd_socket: Callable[[], Any],
        grow_out: Callable[[int], None],
    ) -> None:
        # ``send`` a control message now, ``post`` one that is dropped when the worker
        # is gone; the socket arena descriptors go over; make the output arena hold n.
        self._send = send
        self._post = post
        self._fd_socket = fd_socket
        self._grow_out = grow_out
        self._pool: OutputPool | None = None  # made at the first large step batch
        self._lent: SharedArena | None = None  # lent to the batch in flight
        self._mapped: dict[int, SharedArena] = {}  # every shared arena the worker maps
        self._referenced = [0, 0]  # inputs sent as references, and their bytes
        # A step batch is in flight, and whether the last one's outputs were large.
        self.in_flight = False
        self._big_outputs = False

    def statistics(self) -> OutputPoolStatistics | None:
        """The pool's counters (None before the first large step batch)."""
        return None if self._pool is None else self._pool.statistics()

    @property
    def referenced(self) -> tuple[int, int]:
        """Inputs the worker read in place from a shared arena, and their bytes."""
        return self._referenced[0], self._referenced[1]

    def write(
        self, batch: list[InferRequest], poll: bool, arena_for: Callable[[int], Arena]
    ) -> bytes | None:
        """The exec message of a batch with ensemble steps (inputs that are not
        references written with ``arena_for``, as ``write_batch`` does); None (the
        ordinary path) when its inputs are small and so were the last step batch's
        outputs: there is nothing to gain then."""
        refs: list[list[int] | int] = []
        count = referenced = 0
        big = self._big_outputs
        for request in batch:
            movable = request.movable_inputs if request.ensemble_step else ()
            for index, tensor in enumerate(request.inputs):
                ref: list[int] | int = 0
                data = tensor.data
                nbytes = data.nbytes
                if nbytes >= KEEP_MIN_BYTES:
                    big = True
                    if index < len(movable) and movable[index]:
                        found = reference(data)
                        if found is not None and self._map(found[0]):
                            ref = [found[0].id, found[1]]
                            count += 1
                            referenced += nbytes
                refs.append(ref)
        # Whether this batch's outputs turn out large decides the next batch's way.
        self.in_flight = True
        if not big:
            return None
        self._referenced[0] += count
        self._referenced[1] += referenced
        pool = self._pool
        if pool is None:
            pool = self._pool = OutputPool(self._new_arena)
        lent = self._lent = pool.offer()
        keep = 0 if lent is None else lent.id
        frame, _ = write_batch(batch, arena_for, None, poll, refs if count else None, keep)
        return frame

    def kept(self, reply: Result) -> Any:
        """The reply to the step batch in flight has come: the block its outputs are
        views of when the worker kept them in the lent arena, else None (they are in
        the output arena, to copy as usual)."""
        self.in_flight = False
        end = reply.end
        self._big_outputs = end >= KEEP_MIN_BYTES
        lent, self._lent = self._lent, None
        if lent is None:
            return None
        assert self._pool is not None
        if reply.kept == lent.id:
            return self._pool.keep(lent, end)
        self._pool.give_back(lent)
        return None

    def need(self, needed: int) -> Continue:
        """The outputs do not fit the lent arena: the message that lends a bigger one,
        or (past the pool's bound) has them written to the output arena as usual."""
        lent, self._lent = self._lent, None
        if lent is not None and self._pool is not None:
            self._lent = self._pool.grow(lent, needed)
        if self._lent is not None:
            return Continue(keep=self._lent.id)
        self._grow_out(needed)
        return Continue()

    def failed(self) -> None:
        """The step batch in flight ended without responses."""
        self.in_flight = False
        lent, self._lent = self._lent, None
        if lent is not None and self._pool is not None:
            self._pool.give_back(lent)

    def forget(self, arena_id: int) -> None:
        """A shared arena the worker mapped is closing: the worker unmaps it."""
        if self._mapped.pop(arena_id, None) is not None:
            self._post(Unmap(id=arena_id))

    def close(self) -> None:
        """The worker is gone: close its pool (the workers that mapped those arenas
        unmap them; arrays the server still holds over them stay valid until dropped)."""
        self._lent = None
        self.in_flight = False
        if self._pool is not None:
            self._pool.close()
        for arena in self._mapped.values():
            arena.readers.discard(self)
        self._mapped.clear()

    def _map(self, arena: SharedArena) -> bool:
        """Have the worker map ``arena`` (once; False when it maps too many already)."""
        if arena.id in self._mapped:
            return True
        sock = self._fd_socket()
        if len(self._mapped) >= _MAX_MAPPED or sock is None or arena.fd < 0:
            return False
        # Descriptor first, then the message that tells the worker to pick it up.
        send_fd(sock, arena.fd)
        self._send(NewArena("shared", arena.size, arena.id))
        self._mapped[arena.id] = arena
        arena.readers.add(self)
        return True

    def _new_arena(self, size: int) -> SharedArena | None:
        arena = SharedArena.create(size)
        if not self._map(arena):
            arena.close()
            return None
        return arena
