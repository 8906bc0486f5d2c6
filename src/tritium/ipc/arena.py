"""Anonymous shared-memory arenas (memfd) that carry tensor bytes between processes.

An arena is a ``memfd_create`` file mapped into both the server and one instance worker; its
file descriptor travels over a Unix socket (SCM_RIGHTS), so there is never a name in
``/dev/shm``: nothing can leak when either process is killed, and no client can ever guess or
register one. Arenas only grow by replacement: a bigger one is created and the old one dropped.
"""

from __future__ import annotations

import mmap
import os
from typing import TypeVar

ALIGN = 64
ALIGN_MASK = ALIGN - 1  # align(n) == (n + ALIGN_MASK) & ~ALIGN_MASK, written out in hot loops


def align(n: int) -> int:
    return (n + ALIGN_MASK) & ~ALIGN_MASK


_A = TypeVar("_A", bound="Arena")


def grow_size(needed: int, minimum: int = 1 << 20) -> int:
    """Next power of two >= needed (at least ``minimum``), so growth is rare."""
    size = minimum
    while size < needed:
        size <<= 1
    return size


class Arena:
    """A mapped memfd region. ``buf`` is the writable mmap."""

    __slots__ = ("fd", "size", "buf")

    def __init__(self, fd: int, size: int) -> None:
        self.fd = fd
        self.size = size
        self.buf = mmap.mmap(fd, size) if size else None

    @classmethod
    def create(cls: type[_A], size: int) -> _A:
        fd = os.memfd_create("tritium-arena", os.MFD_CLOEXEC)
        try:
            os.ftruncate(fd, size)
            return cls(fd, size)
        except BaseException:
            os.close(fd)
            raise

    def close(self) -> None:
        """Unmap and close; views still held elsewhere keep the pages alive until dropped."""
        if self.buf is not None:
            try:
                self.buf.close()
            except BufferError:
                # Someone (model code) still holds a numpy view; the mapping is released
                # when that view is garbage collected.
                pass
            self.buf = None
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1
