"""The arenas the server owns for one worker: its input and output arenas.

The server creates every arena (so a killed worker can leak nothing), sends the worker
its descriptor, then the ``NewArena`` message that has it picked up. An arena that is too
small is replaced by a bigger one (``grow_size``); the old one is closed at once, since
the worker maps what it needs itself.
"""

from __future__ import annotations

import socket
from collections.abc import Callable

from tritium.ipc import Arena, grow_size, send_fd
from tritium.ipc.messages import NewArena, ToWorker

INITIAL_ARENA = 1 << 20


class WorkerArenas:
    """The input and output arenas of one worker (and the way to send it any other)."""

    def __init__(self, fd_sock: socket.socket, send: Callable[[ToWorker], None]) -> None:
        self._fd_sock: socket.socket | None = fd_sock
        self._send = send
        self.inputs = self.new("in", INITIAL_ARENA)
        self.outputs = self.new("out", INITIAL_ARENA)

    @property
    def fd_sock(self) -> socket.socket | None:
        """The descriptor socket (None once closed)."""
        return self._fd_sock

    def new(self, which: str, size: int) -> Arena:
        """A fresh arena of ``size`` bytes, handed to the worker as ``which``."""
        arena = Arena.create(size)
        assert self._fd_sock is not None
        # Descriptor first, then the message that tells the worker to pick it up.
        send_fd(self._fd_sock, arena.fd)
        self._send(NewArena(which, size))
        return arena

    def for_inputs(self, size: int) -> Arena:
        """The input arena, replaced first when it holds less than ``size`` bytes."""
        arena = self.inputs
        if size > arena.size:
            arena = self.replace("in", size)
        return arena

    def grow_out(self, needed: int) -> None:
        """Make the output arena hold at least ``needed`` bytes."""
        if needed > self.outputs.size:
            self.replace("out", needed)

    def replace(self, which: str, needed: int) -> Arena:
        old = self.inputs if which == "in" else self.outputs
        arena = self.new(which, grow_size(needed, INITIAL_ARENA))
        old.close()
        if which == "in":
            self.inputs = arena
        else:
            self.outputs = arena
        return arena

    def close(self) -> None:
        self.inputs.close()
        self.outputs.close()
        if self._fd_sock is not None:
            self._fd_sock.close()
            self._fd_sock = None
