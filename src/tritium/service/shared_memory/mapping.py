"""Mappings of client shared-memory objects that hold no file descriptor.

Python's ``mmap.mmap`` keeps a duplicate of the descriptor for as long as the mapping
lives, so each registered region used to cost two descriptors, and a few thousand
registrations exhausted the process's limit (new connections then fail). Here the object
is mapped with libc's ``mmap`` and its descriptor closed at once: a region costs no
descriptor at all.

Touching a page past the end of a truncated object kills the process (SIGBUS), so every
use first checks the object's current size. Without a descriptor that size is read from
``/proc/self/map_files/<start>-<end>``, the kernel's own link to the mapped object; where
that is unavailable the mapping keeps its descriptor and uses ``fstat`` as before.

The pages are unmapped when the last view of them is dropped, never while readable:
views hold the ctypes buffer, and a finalizer on that buffer calls ``munmap``.
"""

from __future__ import annotations

import ctypes
import mmap
import os
import weakref

_libc = ctypes.CDLL(None, use_errno=True)
_mmap = _libc.mmap
_mmap.restype = ctypes.c_void_p
_mmap.argtypes = (
    ctypes.c_void_p,
    ctypes.c_size_t,
    ctypes.c_int,
    ctypes.c_int,
    ctypes.c_int,
    ctypes.c_long,
)
_munmap = _libc.munmap
_munmap.restype = ctypes.c_int
_munmap.argtypes = (ctypes.c_void_p, ctypes.c_size_t)
_MAP_FAILED = ctypes.c_void_p(-1).value
_PAGE = mmap.PAGESIZE


class Mapping:
    """``length`` bytes of the object open as ``fd``, from page-aligned ``offset``.

    Once constructed it owns ``fd`` (a failed construction leaves it to the caller): closed
    at once when the size can be checked without it, otherwise on :meth:`close`.
    """

    __slots__ = ("length", "_buf", "_view", "_size_path", "_fd", "__weakref__")

    def __init__(self, fd: int, length: int, offset: int) -> None:
        address = _mmap(None, length, mmap.PROT_READ | mmap.PROT_WRITE, mmap.MAP_SHARED, fd, offset)
        if address is None or address == _MAP_FAILED:
            err = ctypes.get_errno()
            raise OSError(err, os.strerror(err))
        self.length = length
        self._buf = (ctypes.c_char * length).from_address(address)
        weakref.finalize(self._buf, _munmap, address, length)
        self._view: memoryview | None = memoryview(self._buf).cast("B")
        end = address + (length + _PAGE - 1) // _PAGE * _PAGE
        path = f"/proc/self/map_files/{address:x}-{end:x}"
        self._fd = fd
        self._size_path: str | None = None
        try:
            if os.stat(path).st_ino == os.fstat(fd).st_ino:
                self._size_path = path
        except OSError:
            pass
        if self._size_path is not None:
            os.close(fd)
            self._fd = -1

    def object_size(self) -> int:
        """The mapped object's size now (it may have been truncated since)."""
        if self._size_path is not None:
            return os.stat(self._size_path).st_size
        return os.fstat(self._fd).st_size

    def view(self) -> memoryview:
        """All ``length`` bytes; raises ValueError once closed."""
        if self._view is None:
            raise ValueError("mapping is closed")
        return self._view

    def close(self) -> None:
        """Drop this object's hold on the pages (unmapped once no view remains)."""
        self._view = None
        self._buf = None  # type: ignore[assignment]
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
