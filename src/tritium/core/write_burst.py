"""Answers of one batch written together, after the whole batch has been handed out.

Handing out a batch's responses runs each caller's completion in turn, and a frontend
would write each answer to its client's socket the moment it is encoded. A client waiting
in ``epoll_wait`` or ``recv`` is woken by every such write (the wake-up costs the writer a
few microseconds of CPU), and a client thread that serves many connections is woken again
for each of them. While a scheduler hands out a batch
(``with WRITES.held():``), frontends queue their writes here (``WRITES.write``), and they
are made one after another when the batch's last response has been handed out: a woken
client then finds all of its answers at once.

The queued writes keep their order, so a frontend that sends all of a connection's bytes
through ``write`` never reorders them; one that must close a connection calls ``flush``
first. Only the event loop's thread uses this.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

logger = logging.getLogger("tritium.core.write_burst")

Writer = Callable[[Any], object]


class WriteBurst:
    __slots__ = ("depth", "_queued")

    def __init__(self) -> None:
        self.depth = 0  # > 0 while a batch is being handed out
        self._queued: list[tuple[Writer, Any]] = []

    def write(self, writer: Writer, data: Any) -> None:
        """``writer(data)`` now, or at the end of the batch being handed out."""
        if self.depth:
            self._queued.append((writer, data))
        else:
            writer(data)

    @contextmanager
    def held(self) -> Iterator[None]:
        self.depth += 1
        try:
            yield
        finally:
            self.depth -= 1
            if not self.depth:
                self.flush()

    def flush(self) -> None:
        """Make the queued writes now, in order (one that fails does not stop the rest)."""
        queued = self._queued
        if not queued:
            return
        self._queued = []
        for writer, data in queued:
            try:
                writer(data)
            except Exception:  # noqa: BLE001 - a broken connection must not cost the others
                logger.exception("writing an answer failed")


#: The process's one burst: schedulers hold it, frontends write through it.
WRITES = WriteBurst()
