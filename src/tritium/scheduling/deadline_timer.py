"""A re-armable wake-up at a monotonic deadline, precise to microseconds.

The dynamic batcher waits out ``max_queue_delay_microseconds`` (often a few hundred µs)
from its oldest request. Event-loop timers cannot do that: uvloop's have millisecond
resolution and round a 0.5 ms delay down to "now", so a sub-millisecond wait turns into
a busy loop of early wake-ups (each a callback, a poll and a new timer), and asyncio's own
selector rounds the same wait up to a whole millisecond. On Linux a ``timerfd`` set to an
absolute ``CLOCK_MONOTONIC`` deadline fires once, on time, as a readable file descriptor
the loop already knows how to watch. Elsewhere (or if the timerfd cannot be made) the
loop's timer is used with its delay rounded up to the next millisecond, which fires late
but never early.

Deadlines are ``time.monotonic_ns()`` values (``tritium.core.clock``), which is the clock a
timerfd counts on Linux.
"""

from __future__ import annotations

import asyncio
import ctypes
import os
import sys
import time
from collections.abc import Callable
from typing import Protocol

from tritium.core.clock import now_ns

_CLOCK_MONOTONIC = 1
_TFD_TIMER_ABSTIME = 1
_TFD_CLOEXEC = 0o2000000
_TFD_NONBLOCK = 0o4000
_NS_PER_S = 1_000_000_000


class _Timespec(ctypes.Structure):
    _fields_ = [("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long)]


class _Itimerspec(ctypes.Structure):
    _fields_ = [("it_interval", _Timespec), ("it_value", _Timespec)]


def _libc_timerfd() -> tuple[Callable[[], int], Callable[[int, int], None]] | None:
    """(create, set_absolute_ns) through the C library, None where there is no timerfd."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        create_fn = libc.timerfd_create
        settime_fn = libc.timerfd_settime
    except (OSError, AttributeError):
        return None
    create_fn.argtypes = [ctypes.c_int, ctypes.c_int]
    create_fn.restype = ctypes.c_int
    settime_fn.argtypes = [
        ctypes.c_int,
        ctypes.c_int,
        ctypes.POINTER(_Itimerspec),
        ctypes.POINTER(_Itimerspec),
    ]
    settime_fn.restype = ctypes.c_int

    def create() -> int:
        fd = create_fn(_CLOCK_MONOTONIC, _TFD_NONBLOCK | _TFD_CLOEXEC)
        if fd < 0:
            err = ctypes.get_errno()
            raise OSError(err, os.strerror(err))
        return fd

    spec = _Itimerspec()  # reused: the loop thread is the only caller
    value = spec.it_value
    spec_ref = ctypes.byref(spec)

    def set_absolute_ns(fd: int, when_ns: int) -> None:
        # it_value 0 disarms; a deadline already past fires at once.
        value.tv_sec, value.tv_nsec = divmod(when_ns, _NS_PER_S)
        if settime_fn(fd, _TFD_TIMER_ABSTIME, spec_ref, None) < 0:
            err = ctypes.get_errno()
            raise OSError(err, os.strerror(err))

    return create, set_absolute_ns


def _stdlib_timerfd() -> tuple[Callable[[], int], Callable[[int, int], None]] | None:
    """The same through ``os.timerfd_*`` (Python 3.13 and later)."""
    if not hasattr(os, "timerfd_create"):
        return None

    def create() -> int:
        flags = os.TFD_NONBLOCK | os.TFD_CLOEXEC  # type: ignore[attr-defined]
        return os.timerfd_create(time.CLOCK_MONOTONIC, flags=flags)  # type: ignore[attr-defined]

    def set_absolute_ns(fd: int, when_ns: int) -> None:
        os.timerfd_settime_ns(  # type: ignore[attr-defined]
            fd,
            flags=os.TFD_TIMER_ABSTIME,  # type: ignore[attr-defined]
            initial=when_ns,
        )

    return create, set_absolute_ns


_TIMERFD = _stdlib_timerfd() or _libc_timerfd()


class DeadlineTimer:
    """One pending wake-up at a time: ``timer(when_ns, callback)`` (re)arms it, and
    returns a handle whose ``cancel()`` disarms it; the callback runs on the loop once the
    deadline has passed. ``close()`` releases the file descriptor (call it when the owner
    is done; a closed timer cannot be armed again).

    Created lazily on the first arm, from inside the running loop.
    """

    __slots__ = ("_callback", "_closed", "_fd", "_fallback", "_loop", "_when")

    def __init__(self) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None
        self._fd = -1
        self._callback: Callable[[], None] | None = None
        self._fallback: asyncio.TimerHandle | None = None
        self._when = 0  # the deadline the loop's timer stands for
        self._closed = False

    @property
    def precise(self) -> bool:
        """Whether a timerfd backs this timer (known once it has been armed)."""
        return self._fd >= 0

    def __call__(self, when_ns: int, callback: Callable[[], None]) -> DeadlineTimer:
        if self._closed:
            raise RuntimeError("deadline timer is closed")
        if self._loop is None:
            self._open()
        self._callback = callback
        if self._fd >= 0:
            assert _TIMERFD is not None
            _TIMERFD[1](self._fd, max(when_ns, 1))
            return self
        if self._fallback is not None:
            self._fallback.cancel()
        self._when = when_ns
        self._arm_fallback()
        return self

    def _arm_fallback(self) -> None:
        loop = self._loop
        assert loop is not None
        # Round up to the loop's millisecond: late, never early (no spinning).
        delay_ms = -(-max(0, self._when - now_ns()) // 1_000_000)
        self._fallback = loop.call_later(delay_ms / 1000, self._fallback_due)

    def _fallback_due(self) -> None:
        # The loop measures from the time it cached at the start of its iteration, so
        # its timer can come a little before the deadline: then wait out the rest.
        if now_ns() < self._when:
            self._arm_fallback()
            return
        self._fire()

    def cancel(self) -> None:
        self._callback = None
        if self._fd >= 0:
            assert _TIMERFD is not None
            _TIMERFD[1](self._fd, 0)
        elif self._fallback is not None:
            self._fallback.cancel()
            self._fallback = None

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self.cancel()
        if self._fd >= 0:
            fd, self._fd = self._fd, -1
            if self._loop is not None and not self._loop.is_closed():
                self._loop.remove_reader(fd)
            os.close(fd)

    def _open(self) -> None:
        self._loop = asyncio.get_running_loop()
        if _TIMERFD is None:
            return
        try:
            fd = _TIMERFD[0]()
        except OSError:
            return  # the loop's timer will do
        try:
            self._loop.add_reader(fd, self._on_readable)
        except (NotImplementedError, OSError):
            os.close(fd)
            return
        self._fd = fd

    def _on_readable(self) -> None:
        try:
            os.read(self._fd, 8)  # the expiry count; clears the readiness
        except BlockingIOError:
            return  # re-armed or cancelled after it became readable
        self._fire()

    def _fire(self) -> None:
        self._fallback = None
        callback, self._callback = self._callback, None
        if callback is not None:
            callback()


class TimerHandle(Protocol):
    def cancel(self) -> None: ...


# (when_ns on the scheduler's clock, callback) -> a handle; tests pass a fake one.
Timer = Callable[[int, Callable[[], None]], TimerHandle]


class EarliestWake:
    """A scheduler's one pending wake-up: ``arm(when_ns)`` keeps the earliest deadline
    asked for (a later one is left to the wake-up before it, which looks again and
    re-arms), and ``callback`` runs once it has passed.

    ``timer`` makes the wake-ups (a fake one in tests); without it a ``DeadlineTimer`` of
    its own is used, released by ``close``.
    """

    __slots__ = ("armed", "at", "_callback", "_handle", "_own", "_timer")

    def __init__(self, callback: Callable[[], None], timer: Timer | None = None) -> None:
        self._own = DeadlineTimer() if timer is None else None
        self._timer: Timer = timer or self._own  # type: ignore[assignment]
        self._callback = callback
        self._handle: TimerHandle | None = None
        self.armed = False  # a wake-up is pending
        self.at = 0  # its deadline, while armed

    def arm(self, when_ns: int) -> None:
        if self.armed:
            if self.at <= when_ns:
                return
            self._handle.cancel()  # type: ignore[union-attr]
        self.at = when_ns
        self.armed = True
        self._handle = self._timer(when_ns, self._fire)

    def cancel(self) -> None:
        if self.armed:
            self.armed = False
            handle, self._handle = self._handle, None
            handle.cancel()  # type: ignore[union-attr]

    def close(self) -> None:
        """Disarm and release the timer of its own (it cannot be armed again then)."""
        self.cancel()
        if self._own is not None:
            self._own.close()

    def _fire(self) -> None:
        self.armed = False
        self._handle = None
        self._callback()
