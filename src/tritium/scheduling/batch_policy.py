"""Triton's dynamic batching as a pure object: queues in, batch decisions out.

No asyncio and no clock: the caller passes ``now_ns`` to ``enqueue`` and ``poll``, so
tests drive it with plain integers. The rules follow Triton's DynamicBatchScheduler:

* Requests queue per priority level (1 is highest), FIFO within a level. Expired
  requests are rejected (REJECT) or moved behind the unexpired ones of their level
  (DELAY); like Triton, the policy is applied when the batch-forming walk reaches them.
* A batch is the longest run of queued requests, in priority then arrival order, that
  fits ``max_batch_size`` rows and whose equal-shape inputs match its first request. A
  request that does not fit ends the batch; nothing behind it is pulled forward.
* The batch goes at once at the largest preferred size reached; or when adding the next
  request would pass the largest preferred size; or when it can grow no more; or with no
  queue delay configured. Otherwise it waits until its oldest request has been queued
  for ``max_queue_delay`` (or a request in it times out), then goes as it is.

The walk is incremental: its position and the pending batch survive between polls, so
a poll after each arrival only looks at the new requests, and enqueue, discard and the
common dispatch are O(1) per request. Only a change ahead of the position (a higher
priority arrival, a cancelled or expired request inside the pending batch) restarts it.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Any

from tritium.core import InferRequest
from tritium.core.errors import Rejected
from tritium.scheduling.batch_config import BatchingConfig, QueuePolicy, TimeoutAction
from tritium.scheduling.batch_shapes import InputMatcher

# QueuedRequest.state; an entry is live in a level's main deque while QUEUED and in its
# delayed deque while DELAYED. A stale reference left behind in the main deque by a
# DELAY move is therefore never live there.
_QUEUED = 0
_DELAYED = 1
_GONE = 2

_NEVER = 1 << 126


class QueuedRequest:
    """One request in the queue; ``token`` is the caller's (e.g. the waiting future)."""

    __slots__ = ("deadline_ns", "enqueue_ns", "gen", "level", "request", "rows", "state", "token")

    def __init__(
        self,
        request: InferRequest,
        token: Any,
        rows: int,
        enqueue_ns: int,
        deadline_ns: int,
        level: int,
    ) -> None:
        self.request = request
        self.token = token
        self.rows = rows
        self.enqueue_ns = enqueue_ns
        self.deadline_ns = deadline_ns  # 0: never expires
        self.level = level  # index into the policy's levels, 0 = highest priority
        self.state = _QUEUED
        self.gen = -1  # the walk generation whose pending batch holds this entry

    @property
    def queued(self) -> bool:
        return self.state != _GONE


@dataclass(frozen=True, slots=True)
class BatchDecision:
    """What ``poll`` decided. ``rejected`` timed out and must be failed by the caller
    with ``Unavailable("Request timeout expired")``; ``wake_at_ns`` is when to poll
    again if nothing else happens first (None: only on the next arrival or free runner).
    """

    batch: list[QueuedRequest] | None
    rejected: tuple[QueuedRequest, ...] = ()
    wake_at_ns: int | None = None


_IDLE = BatchDecision(None)


@dataclass(frozen=True, slots=True)
class BatchPolicyStatistics:
    queued: int  # requests
    queued_rows: int
    queued_by_level: tuple[int, ...]  # index 0 is priority level 1 (or the only level)
    delayed: int  # expired with DELAY, still queued
    timed_out: int  # rejected because their timeout expired
    rejected_full: int  # refused at enqueue: "Exceeds maximum queue size"


class _Level:
    __slots__ = (
        "allow_override",
        "count",
        "delay_action",
        "delayed",
        "main",
        "max_size",
        "timeout_ns",
    )

    def __init__(self, policy: QueuePolicy, cap: int) -> None:
        self.main: deque[QueuedRequest] = deque()
        self.delayed: deque[QueuedRequest] = deque()
        self.count = 0  # live entries in both deques
        self.timeout_ns = policy.default_timeout_us * 1000
        self.allow_override = policy.allow_timeout_override
        self.delay_action = policy.timeout_action is TimeoutAction.DELAY
        self.max_size = policy.max_queue_size or cap


class BatchPolicy:
    def __init__(self, config: BatchingConfig) -> None:
        self.config = config
        self._max_batch = max(1, config.max_batch_size)
        preferred = config.preferred_batch_sizes or (self._max_batch,)
        self._preferred = frozenset(preferred)
        self._max_preferred = max(preferred)
        self._delay_ns = config.max_queue_delay_us * 1000
        count = config.priority_levels
        if count == 0:
            policies = [config.default_queue_policy]
            self._default_level = 0
        else:
            if not 1 <= config.default_priority_level <= count:
                raise ValueError(f"default priority level must be in range [1, {count}]")
            policies = [
                config.priority_queue_policies.get(level, config.default_queue_policy)
                for level in range(1, count + 1)
            ]
            self._default_level = config.default_priority_level - 1
        self._levels = [_Level(p, config.queue_cap) for p in policies]
        self._matcher = InputMatcher(config.equal_shape_inputs, config.has_optional_inputs)
        self._queued = 0
        self._queued_rows = 0
        self._delayed = 0
        self._timed_out = 0
        self._rejected_full = 0
        self._rejected: list[QueuedRequest] = []
        self._gen = 0
        self._pending: list[QueuedRequest] = []
        self._restart()

    # -- queue -------------------------------------------------------------------------

    def enqueue(self, request: InferRequest, now_ns: int, token: Any = None) -> QueuedRequest:
        """Queue ``request``; raises Unavailable when its level's queue is full.

        Priority 0, or one outside ``[1, priority_levels]``, means the default level,
        as in Triton (which does not reject out-of-range priorities either).
        """
        priority = request.priority
        if 0 < priority <= len(self._levels):
            index = priority - 1
        else:
            index = self._default_level
        level = self._levels[index]
        if level.count >= level.max_size:
            self._rejected_full += 1
            raise Rejected("Exceeds maximum queue size")
        timeout_ns = level.timeout_ns
        if level.allow_override:
            # Triton only lets a request shorten a configured timeout, never add one.
            override = request.timeout_us * 1000
            if 0 < override < timeout_ns:
                timeout_ns = override
        rows = request.batch_size if request.batch_size > 0 else 1
        entry = QueuedRequest(
            request, token, rows, now_ns, now_ns + timeout_ns if timeout_ns else 0, index
        )
        level.main.append(entry)
        level.count += 1
        self._queued += 1
        self._queued_rows += rows
        # The walk resumes where it stopped; an arrival that sorts before that point
        # (a higher level, or this level once the walk reached its delayed requests)
        # changes the batch, so the walk starts over.
        if index < self._cur_level or (index == self._cur_level and self._cur_delayed):
            self._restart()
        return entry

    def discard(self, entry: QueuedRequest) -> bool:
        """Drop a queued request (its caller went away); False if it already left."""
        state = entry.state
        if state == _GONE:
            return False
        self._remove(entry)
        level = self._levels[entry.level]
        if len(level.main) > 2 * level.count + 64:
            # Dropped requests stay in the deque until they reach its head; a starved
            # level could pile them up, so rebuild it once they dominate.
            level.main = deque(e for e in level.main if e.state == _QUEUED)
            level.delayed = deque(e for e in level.delayed if e.state == _DELAYED)
            self._restart()
        elif entry.gen == self._gen:  # it was in the pending batch
            self._restart()
        return True

    def drain(self) -> list[QueuedRequest]:
        """Remove and return every queued request (to fail them all)."""
        out: list[QueuedRequest] = []
        for level in self._levels:
            out.extend(e for e in level.main if e.state == _QUEUED)
            out.extend(e for e in level.delayed if e.state == _DELAYED)
            level.main.clear()
            level.delayed.clear()
            level.count = 0
        for entry in out:
            entry.state = _GONE
        self._queued = self._queued_rows = self._delayed = 0
        self._restart()
        return out

    # -- batching ----------------------------------------------------------------------

    def poll(self, now_ns: int, can_dispatch: bool) -> BatchDecision:
        """Form the next batch if one should go now. Call again after each batch while
        a runner is free. Without a free runner nothing is examined, so requests keep
        accumulating into bigger batches."""
        if not can_dispatch or not self._queued:
            return _IDLE
        if self._closest_deadline and now_ns >= self._closest_deadline:
            self._restart()  # a request in the pending batch expired
        # A stopped walk always sends in this same poll, so no stop outlives a poll.
        stopped = self._walk(now_ns)
        rejected: tuple[QueuedRequest, ...] = ()
        if self._rejected:
            rejected = tuple(self._rejected)
            self._rejected.clear()
        pending = self._pending
        if not pending:
            return BatchDecision(None, rejected) if rejected else _IDLE
        delay = self._delay_ns
        exceeded = delay != 0 and now_ns - self._oldest_ns >= delay
        if self._best_count and not exceeded:
            count = self._best_count
        elif stopped or exceeded or delay == 0 or self._pending_rows >= self._max_preferred:
            count = len(pending)
        else:
            wake = self._oldest_ns + delay
            if self._closest_deadline and self._closest_deadline < wake:
                wake = self._closest_deadline
            return BatchDecision(None, rejected, wake)
        return BatchDecision(self._take(count), rejected)

    def statistics(self) -> BatchPolicyStatistics:
        return BatchPolicyStatistics(
            queued=self._queued,
            queued_rows=self._queued_rows,
            queued_by_level=tuple(level.count for level in self._levels),
            delayed=self._delayed,
            timed_out=self._timed_out,
            rejected_full=self._rejected_full,
        )

    # -- internals ---------------------------------------------------------------------

    def _restart(self) -> None:
        """Forget the pending batch; the next poll walks from the front again."""
        self._gen += 1
        if self._pending:
            self._pending = []  # never clear: a dispatched batch may be this list
        self._pending_rows = 0
        self._best_count = 0
        self._oldest_ns = _NEVER
        self._closest_deadline = 0
        self._cur_level = 0
        self._cur_delayed = False
        self._cur_pos = 0

    def _remove(self, entry: QueuedRequest) -> None:
        if entry.state == _DELAYED:
            self._delayed -= 1
        entry.state = _GONE
        self._levels[entry.level].count -= 1
        self._queued -= 1
        self._queued_rows -= entry.rows

    def _walk(self, now_ns: int) -> bool:
        """Extend the pending batch from where the last walk rested; True when a
        request that cannot join it ends the batch."""
        li, in_delayed, pos = self._cur_level, self._cur_delayed, self._cur_pos
        level = self._levels[li]
        dq = level.delayed if in_delayed else level.main
        live = _DELAYED if in_delayed else _QUEUED
        pending = self._pending
        matcher = self._matcher
        stopped = False
        while True:
            if pos >= len(dq):
                found = self._next_deque(li, in_delayed)
                if found is None:
                    break
                li, in_delayed = found
                level = self._levels[li]
                dq = level.delayed if in_delayed else level.main
                live = _DELAYED if in_delayed else _QUEUED
                pos = 0
                continue
            entry = dq[pos]
            if entry.state != live:
                if pos:
                    pos += 1
                else:
                    dq.popleft()
                continue
            deadline = entry.deadline_ns
            if deadline and not in_delayed and now_ns >= deadline:
                if level.delay_action:
                    entry.state = _DELAYED
                    self._delayed += 1
                    level.delayed.append(entry)
                else:
                    self._remove(entry)
                    self._timed_out += 1
                    self._rejected.append(entry)
                if pos:
                    pos += 1
                else:
                    dq.popleft()
                continue
            rows = entry.rows
            if pending:
                total = self._pending_rows + rows
                if total > self._max_preferred and not self._best_count:
                    # The batch cannot reach a preferred size: what is pending is the
                    # best it gets (Triton sends it unless the delay already passed).
                    self._best_count = len(pending)
                if total > self._max_batch or (
                    matcher.enabled and not matcher.matches(entry.request)
                ):
                    stopped = True
                    break
            elif matcher.enabled:
                matcher.reset(entry.request)
            pending.append(entry)
            entry.gen = self._gen
            self._pending_rows += rows
            if entry.enqueue_ns < self._oldest_ns:
                self._oldest_ns = entry.enqueue_ns
            if deadline and not in_delayed:
                if not self._closest_deadline or deadline < self._closest_deadline:
                    self._closest_deadline = deadline
            pos += 1
            if self._pending_rows in self._preferred:
                self._best_count = len(pending)
        self._cur_level, self._cur_delayed, self._cur_pos = li, in_delayed, pos
        return stopped

    def _next_deque(self, li: int, in_delayed: bool) -> tuple[int, bool] | None:
        """The next deque in walk order holding a live request, dropping dead heads.

        The walk only moves on when there is something to walk, so that it rests at the
        end of a level's main deque and a new arrival there does not restart it.
        """
        levels = self._levels
        while True:
            if in_delayed:
                li += 1
                if li >= len(levels):
                    return None
                in_delayed = False
                dq, live = levels[li].main, _QUEUED
            else:
                in_delayed = True
                dq, live = levels[li].delayed, _DELAYED
            while dq and dq[0].state != live:
                dq.popleft()
            if dq:
                return li, in_delayed

    def _take(self, count: int) -> list[QueuedRequest]:
        pending = self._pending
        batch = pending if count == len(pending) else pending[:count]
        for entry in batch:
            self._remove(entry)
        self._restart()
        # The batch was the front of the walk: popping dead heads removes it.
        for level in self._levels:
            for dq, live in ((level.main, _QUEUED), (level.delayed, _DELAYED)):
                while dq and dq[0].state != live:
                    dq.popleft()
        return batch
