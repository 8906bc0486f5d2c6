"""System shared-memory regions registered by clients (Triton's shared-memory extension).

A client creates a POSIX shared-memory object, registers ``[offset, offset+byte_size)``
of it under a region name, then names the region in infer requests instead of sending
tensor bytes. The registry maps each region once and hands out bounded views of it.

Regions used by in-flight requests cannot vanish: every request holds a
:class:`RegionLease`, and a region that is unregistered while leased leaves the registry
at once but keeps its mapping until the last lease is released. Texts and codes are
Triton's (``shared_memory_manager.cc``); keys of the server's own segments are refused
and never echoed. A region holds no file descriptor once mapped (``mapping.py``), and
:class:`ShmLimits` caps how many regions, and how many bytes, clients may register and
which keys they may name.
"""

from __future__ import annotations

import mmap
import os
import stat
import threading
from dataclasses import dataclass
from typing import Any

from tritium.core.errors import AlreadyExists, InternalError, InvalidArgument, NotFound
from tritium.service.shared_memory.mapping import Mapping

UINT64_MAX = 2**64 - 1
# POSIX NAME_MAX: the longest file name /dev/shm accepts.
MAX_KEY_LENGTH = 255
MAX_NAME_LENGTH = 255
# Keys the server keeps for its own segments (clients may not open them).
RESERVED_KEY_PREFIX = "tritium"
SHM_DIR = "/dev/shm"


@dataclass(frozen=True, slots=True)
class ShmLimits:
    """What clients may register: at most ``max_regions`` regions of ``max_bytes`` in
    all, and (when ``key_prefix`` is set) only objects whose key starts with it."""

    max_regions: int = 4096
    max_bytes: int = 64 * 2**30
    key_prefix: str = ""


def _check_name(name: object) -> str:
    if type(name) is not str or not name:
        raise InvalidArgument("shared memory region name must be a non-empty string")
    if (
        len(name) > MAX_NAME_LENGTH
        or "/" in name
        or name in (".", "..")
        or not name.isprintable()
    ):
        raise InvalidArgument(
            "invalid shared memory region name: it must be at most "
            f"{MAX_NAME_LENGTH} printable characters, without '/', and not '.' or '..'"
        )
    return name


def _file_name(name: str, key: object) -> str:
    """The file under /dev/shm that ``shm_open(key)`` opens (one leading '/' is optional)."""
    if type(key) is not str or not key:
        raise InvalidArgument(f"failed to register shared memory region '{name}': empty key")
    base = key[1:] if key.startswith("/") else key
    if (
        not base
        or len(base) > MAX_KEY_LENGTH
        or "/" in base
        or "\x00" in base
        or base in (".", "..")
    ):
        raise InvalidArgument(
            f"failed to register shared memory region '{name}': invalid key: it must name "
            f"one object directly under /dev/shm (at most {MAX_KEY_LENGTH} characters, no "
            "'/' after the optional leading one, not '.' or '..')"
        )
    if base.lower().startswith(RESERVED_KEY_PREFIX):
        # Do not echo the key: it may name one of the server's own segments.
        raise InvalidArgument(
            f"failed to register shared memory region '{name}': keys starting with "
            f"'{RESERVED_KEY_PREFIX}' are reserved for the server's own use"
        )
    return base


def _check_prefix(name: str, base: str, prefix: str) -> None:
    if prefix and not base.startswith(prefix):
        # The key is not echoed: it may name an object the client should not know of.
        raise InvalidArgument(
            f"failed to register shared memory region '{name}': this server only accepts "
            f"keys starting with '{prefix}' (--client-shm-key-prefix)"
        )


def _check_uint(name: str, what: str, value: object) -> int:
    if type(value) is not int or value < 0 or value > UINT64_MAX:
        raise InvalidArgument(
            f"failed to register shared memory region '{name}': '{what}' must be an "
            f"unsigned 64-bit integer, got {value!r}"
        )
    return value


class Region:
    """One registered region: the mapping of ``[offset, offset+byte_size)`` of ``key``."""

    __slots__ = ("name", "key", "offset", "byte_size", "_map", "_skew", "_users",
                 "_registered", "_closed")

    def __init__(self, name: str, key: str, offset: int, byte_size: int, fd: int) -> None:
        self.name = name
        self.key = key
        self.offset = offset
        self.byte_size = byte_size
        # mmap offsets must be page aligned: map from the page holding ``offset``.
        self._skew = offset % mmap.ALLOCATIONGRANULARITY
        # Owns ``fd`` from here (closes it at once where it can).
        self._map = Mapping(fd, byte_size + self._skew, offset - self._skew)
        self._users = 0
        self._registered = True
        self._closed = False

    def status(self) -> dict[str, Any]:
        return {"name": self.name, "key": self.key, "offset": self.offset,
                "byte_size": self.byte_size}

    @property
    def users(self) -> int:
        """Leases currently held on this region."""
        return self._users

    @property
    def closed(self) -> bool:
        return self._closed

    def view(self, offset: int, byte_size: int | None) -> memoryview:
        """The bytes ``[offset, offset+byte_size)`` of the region, with Triton's checks.

        ``byte_size`` None (the request did not say) fails the bounds check, as in Triton.
        """
        name = self.name
        if type(offset) is not int or offset < 0 or offset > UINT64_MAX:
            raise InvalidArgument(f"Invalid offset for shared memory region: '{name}'")
        if offset >= self.byte_size:
            raise InvalidArgument(f"Invalid offset for shared memory region: '{name}'")
        if byte_size is None or type(byte_size) is not int or byte_size < 0:
            raise InvalidArgument(
                f"Invalid offset + byte size for shared memory region: '{name}'"
            )
        if byte_size > UINT64_MAX - offset:
            raise InvalidArgument(
                f"Integer overflow detected: byte_size ({byte_size}) + offset ({offset}) "
                f"exceeds maximum value ({UINT64_MAX}) for region '{name}'"
            )
        if offset + byte_size > self.byte_size:
            raise InvalidArgument(
                f"Invalid offset + byte size for shared memory region: '{name}'"
            )
        if self._closed:
            raise NotFound(f"Unable to find shared memory region: '{name}'")
        # Touching a page past the end of a truncated object would kill the server.
        if self._map.object_size() < self.offset + self.byte_size:
            raise InvalidArgument(
                f"shared memory region '{name}' is no longer valid: its shared memory object "
                "was truncated below the registered offset + byte size"
            )
        start = self._skew + offset
        return self._map.view()[start : start + byte_size]

    def _acquire(self) -> None:
        self._users += 1

    def _release(self) -> None:
        self._users -= 1
        if self._users <= 0 and not self._registered:
            self._close()

    def _unregister(self) -> None:
        self._registered = False
        if self._users <= 0:
            self._close()

    def _close(self) -> None:
        if self._closed:
            return
        self._closed = True
        # A view still referenced (e.g. an input array a response keeps) keeps the pages
        # mapped until it is dropped, never freed while readable.
        self._map.close()


class RegionLease:
    """The regions one request uses; :meth:`release` (idempotent) hands them back."""

    __slots__ = ("_regions", "_lock")

    def __init__(self, lock: threading.Lock) -> None:
        self._regions: dict[str, Region] = {}
        self._lock = lock

    def _add(self, region: Region) -> Region:
        if region.name not in self._regions:
            region._acquire()
            self._regions[region.name] = region
        return region

    def region(self, name: str) -> Region:
        """A region this lease already holds."""
        return self._regions[name]

    def release(self) -> None:
        with self._lock:
            regions = list(self._regions.values())
            self._regions.clear()
            for region in regions:
                region._release()


class SharedMemoryRegistry:
    """Registered system shared-memory regions, by name."""

    def __init__(self, shm_dir: str = SHM_DIR, limits: ShmLimits | None = None) -> None:
        self._dir = shm_dir
        self._limits = limits if limits is not None else ShmLimits()
        self._regions: dict[str, Region] = {}
        self._bytes = 0
        self._lock = threading.Lock()

    def register(self, name: str, key: str, offset: int, byte_size: int) -> None:
        """Map ``[offset, offset+byte_size)`` of the shared-memory object ``key``."""
        name = _check_name(name)
        base = _file_name(name, key)
        offset = _check_uint(name, "offset", offset)
        byte_size = _check_uint(name, "byte_size", byte_size)
        _check_prefix(name, base, self._limits.key_prefix)
        with self._lock:
            if name in self._regions:
                raise AlreadyExists(f"shared memory region '{name}' already in manager")
            try:
                # O_NOFOLLOW: a link planted in /dev/shm cannot point the server elsewhere.
                fd = os.open(
                    os.path.join(self._dir, base),
                    os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK,
                )
            except OSError:
                raise InternalError(f"Unable to open shared memory region: '{key}'") from None
            try:
                info = os.fstat(fd)
                if not stat.S_ISREG(info.st_mode) or info.st_size < 0:
                    raise InternalError(f"Invalid shared memory region: '{key}'")
                # Python ints cannot overflow, so this is the exact bound.
                if byte_size == 0 or offset + byte_size > info.st_size:
                    raise InvalidArgument(
                        f"failed to register shared memory region '{name}': invalid args"
                    )
                self._check_room(name, byte_size)
                try:
                    region = Region(name, key, offset, byte_size, fd)
                except (OSError, ValueError, OverflowError) as exc:
                    raise InvalidArgument(
                        f"failed to register shared memory region '{name}': unable to map "
                        f"it: {exc.strerror if isinstance(exc, OSError) else 'invalid args'}"
                    ) from None
            except BaseException:
                os.close(fd)
                raise
            self._regions[name] = region
            self._bytes += byte_size

    def _check_room(self, name: str, byte_size: int) -> None:
        limits = self._limits
        if len(self._regions) >= limits.max_regions:
            raise InvalidArgument(
                f"failed to register shared memory region '{name}': the server already "
                f"holds {limits.max_regions} regions, its limit (--client-shm-max-regions); "
                "unregister some first"
            )
        if self._bytes + byte_size > limits.max_bytes:
            raise InvalidArgument(
                f"failed to register shared memory region '{name}': {byte_size} more bytes "
                f"would exceed the {limits.max_bytes} bytes the server maps for clients "
                "(--client-shm-max-bytes); unregister some first"
            )

    def status(self, name: str = "") -> list[dict[str, Any]]:
        """Every region (sorted by name, as Triton lists them), or the one named."""
        with self._lock:
            if not name:
                return [self._regions[n].status() for n in sorted(self._regions)]
            region = self._regions.get(name)
        if region is None:
            raise NotFound(f"Unable to find system shared memory region: '{name}'")
        return [region.status()]

    def unregister(self, name: str = "") -> None:
        """Forget the region named (all when ``name`` is ""); unknown names are no error.

        A region still used by in-flight requests keeps its mapping until they finish.
        """
        with self._lock:
            if not name:
                regions = list(self._regions.values())
                self._regions.clear()
            else:
                region = self._regions.pop(name, None)
                regions = [] if region is None else [region]
            for region in regions:
                self._bytes -= region.byte_size
                region._unregister()

    unregister_all = unregister

    def lease(self) -> RegionLease:
        """An empty lease to :meth:`acquire` regions into."""
        return RegionLease(self._lock)

    def acquire(self, lease: RegionLease, name: str) -> Region:
        """The region ``name``, held by ``lease`` until it is released."""
        with self._lock:
            region = self._regions.get(name) if type(name) is str else None
            if region is None:
                raise NotFound(f"Unable to find shared memory region: '{name}'")
            return lease._add(region)

    def close(self) -> None:
        """Unregister everything (server shutdown); leased mappings close on release."""
        self.unregister()

    def has(self, name: str) -> bool:
        return name in self._regions

    def __len__(self) -> int:
        return len(self._regions)
