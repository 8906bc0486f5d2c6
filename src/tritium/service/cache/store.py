"""The server-wide response store: a bounded least-recently-used map of cached responses.

Memory is accounted exactly: an entry costs its outputs' payload bytes (BYTES tensors in
their serialized form) plus their names, datatypes and shapes and the key, and the bytes
of every encoded form a frontend keeps with it (see :class:`CachedResponse`); the store
never holds more than its size. A response larger than the whole store is not kept. Eviction
drops the least recently used entry first (a lookup hit or an insertion makes an entry
the most recent), so which entries remain is deterministic for a given order of requests.
Every entry belongs to one loaded version (its owner) and is dropped with it.

A frontend may also file a *replay* with an entry: its own key for a whole request, byte for
byte (less what it splices back in, such as the request id), that was answered from the
entry in one of its encoded forms. A request with the same bytes is then answered with
that form without being decoded, keyed or looked up (``replay``); the replay's key counts
in the entry's bytes and goes with it.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Hashable, Sequence
from typing import Any

import numpy as np

from tritium.core.clock import now_ns
from tritium.core.packed_bytes import PackedBytes, wire_bytes
from tritium.core.types import OutputTensor

_OBJECT = np.dtype(np.object_)
# The bytes an output's shape costs per dimension (as an int64).
_DIM_BYTES = 8


class CachedResponse:
    """A response's outputs as kept: read-only arrays owned by the store.

    Frontends keep the bytes they encoded a hit into with the entry (``keep_encoded``, one
    value per key of theirs: protocol, requested outputs, encoding options) and reuse them
    for the next hits; those bytes count in ``nbytes`` and go with the entry."""

    __slots__ = ("outputs", "names", "nbytes", "owner", "key", "store", "forms", "replays")

    def __init__(
        self,
        outputs: tuple[OutputTensor, ...],
        nbytes: int,
        owner: object,
        key: bytes = b"",
        store: ResponseStore | None = None,
    ) -> None:
        self.outputs = outputs
        self.names = frozenset(o.name for o in outputs)
        self.nbytes = nbytes
        self.owner = owner
        self.key = key
        self.store = store
        #: Encoded forms by the frontend's key (None until the first is kept).
        self.forms: dict[Hashable, Any] | None = None
        #: The replay keys filed with this entry (see :meth:`ResponseStore.keep_replay`).
        self.replays: list[Hashable] | None = None

    def encoded(self, key: Hashable) -> Any:
        """The encoded form kept under ``key``, else None."""
        forms = self.forms
        return None if forms is None else forms.get(key)

    def keep_encoded(self, key: Hashable, value: Any, nbytes: int) -> bool:
        """Keep ``value`` (``nbytes`` bytes) under ``key``, counted against the store's size;
        False when it is not kept."""
        store = self.store
        return store is not None and store.keep_encoded(self, key, value, nbytes)

    def keep_replay(self, replay: Hashable, form: Hashable, nbytes: int) -> bool:
        """File ``replay`` (a frontend's key for a whole request, ``nbytes`` bytes) as
        answered by this entry's form ``form``; False when it is not kept."""
        store = self.store
        return store is not None and store.keep_replay(self, replay, form, nbytes)


def keep_outputs(
    outputs: Sequence[OutputTensor], key: bytes
) -> tuple[tuple[OutputTensor, ...], int]:
    """Owned, read-only copies of ``outputs`` (they may view a worker's arena) and the
    bytes the entry costs."""
    kept = []
    nbytes = len(key)
    for output in outputs:
        data: Any = output.data
        if type(data) is PackedBytes or data.dtype == _OBJECT:
            raw = bytes(wire_bytes(data))
            data = PackedBytes(raw, tuple(output.shape))
            payload = len(raw)
        else:
            data = np.array(data, copy=True, order="C")
            data.flags.writeable = False
            payload = data.nbytes
        nbytes += payload + len(output.name) + len(output.datatype) + _DIM_BYTES * len(output.shape)
        kept.append(OutputTensor(output.name, output.datatype, tuple(output.shape), data))
    return tuple(kept), nbytes


class ResponseStore:
    """At most ``size`` bytes of cached responses, least recently used evicted first.

    The counters are Triton's server-wide cache metrics (``nv_cache_*``)."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.used = 0
        self._entries: OrderedDict[bytes, CachedResponse] = OrderedDict()
        self._by_owner: dict[object, set[bytes]] = {}
        # replay key -> (the entry, the form that answers it)
        self._replays: dict[Hashable, tuple[CachedResponse, Hashable]] = {}
        self.hits = 0
        self.misses = 0
        self.evictions = 0
        self.lookup_ns = 0
        self.insertion_ns = 0

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def lookups(self) -> int:
        return self.hits + self.misses

    @property
    def utilization(self) -> float:
        """The share of the size in use (0..1)."""
        return self.used / self.size if self.size else 0.0

    def lookup(self, key: bytes) -> CachedResponse | None:
        """The entry for ``key`` (now the most recently used), else None. Counts the hit or
        the miss; the caller, which times the whole lookup, adds to ``lookup_ns``."""
        entry = self._entries.get(key)
        if entry is None:
            self.misses += 1
            return None
        self._entries.move_to_end(key)
        self.hits += 1
        return entry

    def peek(self, key: bytes) -> CachedResponse | None:
        """The entry for ``key``, neither counted nor made the most recent."""
        return self._entries.get(key)

    def insert(self, key: bytes, outputs: Sequence[OutputTensor], owner: object) -> int:
        """Keep ``outputs`` under ``key``, evicting the least recently used entries to make
        room; returns the nanoseconds it took. A response larger than the store is not kept."""
        start = now_ns()
        kept, nbytes = keep_outputs(outputs, key)
        if nbytes <= self.size:
            old = self._entries.get(key)
            if old is not None:
                self._remove(key, old)
            while self.used + nbytes > self.size:
                oldest, entry = next(iter(self._entries.items()))
                self._remove(oldest, entry)
                self.evictions += 1
            self._entries[key] = CachedResponse(kept, nbytes, owner, key, self)
            self.used += nbytes
            self._by_owner.setdefault(owner, set()).add(key)
        spent = now_ns() - start
        self.insertion_ns += spent
        return spent

    def keep_encoded(
        self, entry: CachedResponse, form: Hashable, value: Any, nbytes: int
    ) -> bool:
        """Add an encoded form to ``entry`` (still held, not holding ``form`` yet), evicting
        the least recently used other entries to make room; False when it does not fit
        without evicting ``entry`` itself, or ``entry`` is no longer held."""
        if entry.forms and form in entry.forms:
            return False
        if not self._make_room(entry, nbytes):
            return False
        if entry.forms is None:
            entry.forms = {}
        entry.forms[form] = value
        return True

    def keep_replay(
        self, entry: CachedResponse, replay: Hashable, form: Hashable, nbytes: int
    ) -> bool:
        """File ``replay`` with ``entry`` (still held, holding ``form``), counted as
        ``nbytes`` more of it; False when it does not fit or is filed already."""
        if replay in self._replays or not entry.forms or form not in entry.forms:
            return False
        if not self._make_room(entry, nbytes):
            return False
        self._replays[replay] = (entry, form)
        if entry.replays is None:
            entry.replays = []
        entry.replays.append(replay)
        return True

    def replay(self, replay: Hashable, owner: object) -> Any:
        """The form filed for ``replay`` if its entry belongs to ``owner``, counted as a
        lookup hit (the entry becomes the most recent); else None, counting nothing."""
        filed = self._replays.get(replay)
        if filed is None:
            return None
        entry, form = filed
        if entry.owner is not owner:
            return None
        self._entries.move_to_end(entry.key)
        self.hits += 1
        return entry.forms[form]  # type: ignore[index]  # filed only with its form

    def _make_room(self, entry: CachedResponse, nbytes: int) -> bool:
        """Grow ``entry`` (still held) by ``nbytes``, evicting the least recently used
        other entries; False when it cannot without evicting ``entry`` itself."""
        if self._entries.get(entry.key) is not entry or entry.nbytes + nbytes > self.size:
            return False
        while self.used + nbytes > self.size:
            oldest, victim = next(iter(self._entries.items()))
            if victim is entry:
                # Only possible if entry is also the least recent; it never evicts itself.
                return False
            self._remove(oldest, victim)
            self.evictions += 1
        entry.nbytes += nbytes
        self.used += nbytes
        return True

    def drop_owner(self, owner: object) -> int:
        """Drop every entry of ``owner`` (a version reloaded or unloaded); returns how many."""
        keys = self._by_owner.pop(owner, ())
        for key in keys:
            entry = self._entries.pop(key)
            self.used -= entry.nbytes
            self._forget(entry)
        return len(keys)

    def _remove(self, key: bytes, entry: CachedResponse) -> None:
        del self._entries[key]
        self.used -= entry.nbytes
        self._forget(entry)
        keys = self._by_owner.get(entry.owner)
        if keys is not None:
            keys.discard(key)
            if not keys:
                del self._by_owner[entry.owner]

    def _forget(self, entry: CachedResponse) -> None:
        """``entry`` is no longer held: its replays go, and a hit answered from it before
        keeps nothing more with it."""
        entry.store = None
        for replay in entry.replays or ():
            del self._replays[replay]
