"""Triton's sequence batcher as a pure policy: sequences, slots, batches, idle release.

No I/O and no clock of its own: the shell (``SequenceBatcher``) passes ``now`` in and
acts on what comes back, so tests drive it with a fake clock.

- A request names its sequence by correlation id. Its first request must carry START;
  a START for a running sequence restarts it in the same slot (its queued requests run
  first); after END the id is free again.
- A new sequence takes a free slot of one instance (the instance with the most free
  slots) and keeps it until it ends or sits idle longer than
  ``max_sequence_idle_microseconds``. With no free slot it waits in the backlog, in
  arrival order, until one frees. All queued requests together are bounded.
- An instance runs one batch at a time, at most one request per sequence, so each
  sequence's requests reach the same instance in the order they were sent.
- ``oldest``: a batch is the sequences whose next requests are oldest, up to
  ``max_batch_size``; it waits (``max_queue_delay_microseconds`` from the oldest) for the
  largest preferred size. ``direct``: a batch is every slot with a request, in slot
  order; it waits (the same delay) while fewer than ``minimum_slot_utilization`` of the
  slots have one.
"""

from __future__ import annotations

from collections import OrderedDict, deque
from dataclasses import dataclass, field
from typing import Any

from tritium.core.errors import InvalidArgument, Unavailable
from tritium.core.types import InferRequest
from tritium.scheduling.sequence_config import SequenceConfig

FLAG_START = 1
FLAG_END = 2


class Sequence:
    """One running sequence: where it runs, what waits for it, what it keeps."""

    __slots__ = (
        "busy",
        "corrid",
        "ended",
        "instance",
        "key",
        "last_ns",
        "pending",
        "slot",
        "state",
    )

    def __init__(self, key: int | str, now: int) -> None:
        self.key = key
        self.instance = -1  # -1 while in the backlog
        self.slot = -1
        self.pending: deque[SequenceEntry] = deque()
        self.busy = False  # one of its requests is running
        self.ended = False  # its last request so far carried END
        self.last_ns = now
        # Kept for the shell: the CORRID input and the implicit state of this sequence.
        self.corrid: Any = None
        self.state: Any = None

    def __repr__(self) -> str:
        return f"Sequence({self.key!r}, instance={self.instance}, slot={self.slot})"


class SequenceEntry:
    """One queued request of a sequence."""

    __slots__ = ("end", "enqueue_ns", "request", "sequence", "start", "token")

    def __init__(
        self, request: InferRequest, sequence: Sequence, token: Any, now: int, flags: int
    ) -> None:
        self.request = request
        self.sequence = sequence
        self.token = token
        self.enqueue_ns = now
        self.start = bool(flags & FLAG_START)
        self.end = bool(flags & FLAG_END)


class _Instance:
    __slots__ = ("busy", "free", "ready", "slots")

    def __init__(self, slots: int) -> None:
        self.slots: list[Sequence | None] = [None] * slots
        self.free = list(range(slots - 1, -1, -1))  # a stack: lowest slot on top
        # Sequences with a request waiting and none running (insertion-ordered set).
        self.ready: dict[Sequence, None] = {}
        self.busy = False


@dataclass(frozen=True, slots=True)
class SequenceDecision:
    """What ``poll`` decided for one instance: a batch to run now, or a time to look again
    (None: nothing to do until a request arrives)."""

    batch: list[SequenceEntry] | None = None
    wake_at_ns: int | None = None


@dataclass(frozen=True, slots=True)
class SequencePolicyStatistics:
    active: int  # sequences holding a slot
    backlog: int  # sequences waiting for one
    queued: int  # requests waiting
    idle_released: int
    slots: tuple[int, ...] = field(default=())  # occupied slots per instance


class SequencePolicy:
    def __init__(self, config: SequenceConfig, instances: int) -> None:
        self.config = config
        self._name = config.model_name
        self._instances = [_Instance(config.slots_per_instance) for _ in range(instances)]
        self._sequences: dict[int | str, Sequence] = {}
        self._backlog: deque[Sequence] = deque()
        # Slot holders by last activity, least recent first (idle release).
        self._activity: OrderedDict[Sequence, None] = OrderedDict()
        self._queued = 0
        self._max_batch = config.max_batch
        self._delay_ns = config.max_queue_delay_us * 1000
        self._idle_ns = config.max_sequence_idle_us * 1000
        preferred = [s for s in config.preferred_batch_sizes if s <= self._max_batch]
        self._target = max(preferred) if preferred else self._max_batch
        self._oldest = config.strategy == "oldest"
        self._min_ready = config.minimum_slot_utilization * config.slots_per_instance
        self._idle_released = 0
        self._max_queued = config.max_queued
        self._batching = config.batching

    # -- arrivals ------------------------------------------------------------------------

    def enqueue(self, request: InferRequest, now: int, token: Any) -> SequenceEntry:
        """Queue ``request`` on its sequence; raises for a request Triton refuses."""
        key = request.correlation_id
        if key == 0 or key == "":
            raise InvalidArgument(
                f"inference request to model '{self._name}' must specify a non-zero or "
                "non-empty correlation ID"
            )
        if self._queued >= self._max_queued:
            raise Unavailable("Exceeds maximum queue size")
        if self._batching and request.batch_size != 1:
            raise InvalidArgument(
                f"inference request to model '{self._name}' must specify batch-size 1 due "
                "to requirements of sequence batcher"
            )
        flags = request.flags
        sequence = self._sequences.get(key)
        if sequence is None or (sequence.ended and not flags & FLAG_START):
            if not flags & FLAG_START:
                raise InvalidArgument(
                    f"inference request for sequence {key} to model '{self._name}' must "
                    "specify the START flag on the first request of the sequence"
                )
            sequence = self._sequences[key] = Sequence(key, now)
            if not self._assign(sequence):
                self._backlog.append(sequence)
        entry = SequenceEntry(request, sequence, token, now, flags)
        sequence.ended = entry.end
        sequence.pending.append(entry)
        self._queued += 1
        if sequence.instance >= 0:
            sequence.last_ns = now
            self._activity.move_to_end(sequence)  # it holds a slot, so it is listed
            if not sequence.busy and len(sequence.pending) == 1:
                self._instances[sequence.instance].ready[sequence] = None
        return entry

    def instance_of(self, entry: SequenceEntry) -> int:
        """The instance that runs ``entry``'s sequence (-1 while in the backlog)."""
        return entry.sequence.instance

    def discard(self, entry: SequenceEntry) -> bool:
        """Drop a queued request whose caller went away; False if it is not queued."""
        sequence = entry.sequence
        try:
            index = sequence.pending.index(entry)
        except ValueError:
            return False
        del sequence.pending[index]
        self._queued -= 1
        if entry.start and index < len(sequence.pending):
            sequence.pending[index].start = True  # the restart still happens
        if not sequence.pending and sequence.instance >= 0:
            self._instances[sequence.instance].ready.pop(sequence, None)
        return True

    # -- batches -------------------------------------------------------------------------

    def poll(self, index: int, now: int) -> SequenceDecision:
        """The next batch for idle instance ``index``, or when to look again."""
        instance = self._instances[index]
        if instance.busy or not instance.ready:
            return SequenceDecision()
        ready = list(instance.ready)
        if self._oldest:
            if len(ready) > 1:
                ready.sort(key=_head_time)
            oldest = ready[0].pending[0].enqueue_ns
            enough = len(ready) >= self._target
        else:
            oldest = min(s.pending[0].enqueue_ns for s in ready)
            enough = len(ready) >= self._min_ready
            ready.sort(key=_slot)
        if not enough and self._delay_ns and now < oldest + self._delay_ns:
            return SequenceDecision(wake_at_ns=oldest + self._delay_ns)
        chosen = ready[: self._max_batch]
        batch = []
        for sequence in chosen:
            del instance.ready[sequence]
            sequence.busy = True
            batch.append(sequence.pending.popleft())
        self._queued -= len(batch)
        instance.busy = True
        return SequenceDecision(batch)

    def completed(self, index: int, batch: list[SequenceEntry], now: int) -> None:
        """Instance ``index`` finished ``batch``: it is idle again; sequences whose END
        ran give their slots to the backlog."""
        instance = self._instances[index]
        instance.busy = False
        for entry in batch:
            sequence = entry.sequence
            sequence.busy = False
            if sequence.instance != index:  # released (idle, unload) while it ran
                continue
            sequence.last_ns = now
            if sequence.pending:
                instance.ready[sequence] = None
                self._activity.move_to_end(sequence)
            elif entry.end and sequence.ended:
                self._release(sequence)
            else:
                self._activity.move_to_end(sequence)

    # -- idle release --------------------------------------------------------------------

    def expire(self, now: int) -> tuple[list[Sequence], int | None]:
        """Release sequences idle longer than ``max_sequence_idle_microseconds``; returns
        them and when the next one could expire (None: no sequence holds a slot)."""
        released: list[Sequence] = []
        idle_ns = self._idle_ns
        activity = self._activity
        while activity:
            sequence = next(iter(activity))
            due = sequence.last_ns + idle_ns
            if due > now:
                return released, due
            if sequence.busy or sequence.pending:
                # Waiting for its instance, not idle: look again a whole period later.
                sequence.last_ns = now
                activity.move_to_end(sequence)
                continue
            self._release(sequence)
            self._idle_released += 1
            released.append(sequence)
        return released, None

    @property
    def idle_ns(self) -> int:
        return self._idle_ns

    # -- slots ---------------------------------------------------------------------------

    def _assign(self, sequence: Sequence) -> bool:
        best: _Instance | None = None
        best_index = -1
        for index, instance in enumerate(self._instances):
            if instance.free and (best is None or len(instance.free) > len(best.free)):
                best, best_index = instance, index
        if best is None:
            return False
        slot = best.free.pop()
        best.slots[slot] = sequence
        sequence.instance = best_index
        sequence.slot = slot
        self._activity[sequence] = None
        if sequence.pending and not sequence.busy:
            best.ready[sequence] = None
        return True

    def _release(self, sequence: Sequence) -> None:
        instance = self._instances[sequence.instance]
        instance.slots[sequence.slot] = None
        instance.ready.pop(sequence, None)
        instance.free.append(sequence.slot)
        instance.free.sort(reverse=True)
        self._activity.pop(sequence, None)
        if self._sequences.get(sequence.key) is sequence:
            del self._sequences[sequence.key]
        sequence.instance = -1
        sequence.slot = -1
        while self._backlog and instance.free:
            waiting = self._backlog.popleft()
            waiting.last_ns = sequence.last_ns
            self._assign(waiting)

    def drain(self) -> list[SequenceEntry]:
        """Every queued request, removed (model unloading, no instance left); every
        sequence is forgotten."""
        entries: list[SequenceEntry] = []
        for sequence in list(self._sequences.values()):
            entries.extend(sequence.pending)
            sequence.pending.clear()
        for instance in self._instances:
            instance.ready.clear()
            for held in instance.slots:
                if held is not None:
                    entries.extend(held.pending)
                    held.pending.clear()
        self._sequences.clear()
        self._backlog.clear()
        self._activity.clear()
        for instance in self._instances:
            for slot, held in enumerate(instance.slots):
                if held is not None:
                    held.instance = -1
                    instance.slots[slot] = None
            instance.free = list(range(len(instance.slots) - 1, -1, -1))
        self._queued = 0
        return entries

    def statistics(self) -> SequencePolicyStatistics:
        return SequencePolicyStatistics(
            active=len(self._activity),
            backlog=len(self._backlog),
            queued=self._queued,
            idle_released=self._idle_released,
            slots=tuple(
                sum(1 for s in instance.slots if s is not None) for instance in self._instances
            ),
        )


def _head_time(sequence: Sequence) -> int:
    return sequence.pending[0].enqueue_ns


def _slot(sequence: Sequence) -> int:
    return sequence.slot
