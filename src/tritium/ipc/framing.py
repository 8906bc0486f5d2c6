"""Length-prefixed message framing for the server ⇄ worker control socket.

Each message is a 4-byte little-endian length followed by its JSON document (the kinds
and their codec are in ``messages``). Messages are small (names, shapes, offsets); tensor
bytes live in arenas and never pass through here. A decoder is given the side's decode
function (``messages.decode_to_worker`` or ``decode_to_server``).
"""

from __future__ import annotations

import os
import socket
import struct
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from tritium.ipc import messages

_LEN = struct.Struct("<I")
MAX_MESSAGE = 256 * 1024 * 1024
_encode = messages.encode

#: Polls shorter than this tell nothing of whether the core is shared.
_SHARE_MIN_NS = 20_000
#: The weight of the newest poll in the running share of polls that found the core shared.
_SHARED_WEIGHT = 1 / 16
#: The longer poll is used while at most this share of recent polls found the core shared.
_SHARED_AT_MOST = 0.25
#: While polling short, one wait in 32 that would not poll polls long to look again.
_PROBE_EVERY = 31

#: Turns one frame's body into a message.
Decode = Callable[[Any], Any]


def encode(message: Any) -> bytes:
    """One message (a ``messages`` struct) as a frame."""
    body = _encode(message)
    return _LEN.pack(len(body)) + body


class FrameDecoder:
    """Incremental decoder: feed bytes, get complete messages.

    A frame that does not decode (``messages.UnknownMessage``, ``MalformedMessage``) goes
    to ``on_error`` and is skipped; without ``on_error``, ``feed`` raises it (the frames
    before it in that feed are dropped with it, those after it stay buffered).
    """

    __slots__ = ("_buf", "_decode", "_on_error")

    def __init__(
        self, decode: Decode, on_error: Callable[[ValueError], None] | None = None
    ) -> None:
        self._buf = bytearray()
        self._decode = decode
        self._on_error = on_error

    def feed(self, data: bytes) -> list[Any]:
        buf = self._buf
        if not buf and len(data) >= 4:
            # The usual case: exactly one whole message, parsed without buffering.
            (length,) = _LEN.unpack_from(data)
            if len(data) == 4 + length:
                try:
                    return [self._decode(memoryview(data)[4:])]
                except ValueError as exc:
                    if self._on_error is None:
                        raise
                    self._on_error(exc)
                    return []
        buf += data
        out: list[Any] = []
        pos = 0
        n = len(buf)
        failed: ValueError | None = None
        while n - pos >= 4:
            (length,) = _LEN.unpack_from(buf, pos)
            if length > MAX_MESSAGE:
                raise ValueError(f"control message of {length} bytes exceeds the limit")
            end = pos + 4 + length
            if end > n:
                break
            # Let go of the view at once (an error's traceback would keep it), so that
            # the buffer can shrink below; the message holds no part of it.
            body = memoryview(buf)[pos + 4 : end]
            try:
                out.append(self._decode(body))
            except ValueError as exc:
                if self._on_error is None:
                    failed = exc
                    pos = end
                    break
                self._on_error(exc)
            finally:
                body.release()
            pos = end
        if pos:
            del buf[:pos]
        if failed is not None:
            raise failed
        return out


class MessageReader:
    """Blocking reader of framed messages: one ``recv`` usually yields a whole message
    (or several), instead of one call for the length and another for the body.

    With ``poll_ns``, a reader whose last wait for a message was shorter than that polls
    the socket (yielding the CPU at each turn, which hands it to threads of the same session
    or cgroup only) for up to ``poll_ns`` before it blocks: when messages come back to
    back, as a worker's next batch does under load or for a lone client, the process is
    still awake when the next one arrives and neither side pays for a wake-up. A reader
    that waited longer last time sleeps at once, so an idle process, or one whose messages
    come far apart, does not poll. ``next(poll_ns)`` (the sender said more comes soon)
    polls up to that longer budget, unless the last wait outlasted it too: a client that
    pauses between requests is not polled for every time.

    With ``spare_poll_ns`` (longer than ``poll_ns``), the reader polls up to that longer
    budget while its polls find the core to themselves: their CPU time keeps up with the
    clock, so nothing else was waiting for the core (a model whose own compute keeps the
    batches apart on a machine with idle time). When a quarter or more of the recent polls
    found the core shared (their CPU time fell behind: the scheduler ran another busy
    process) it polls ``poll_ns`` again, and the spinning does not take time from the
    processes that feed it; now and then a wait polls long once to look again.
    """

    __slots__ = (
        "_sock",
        "_decoder",
        "_ready",
        "_poll_ns",
        "_spare_poll_ns",
        "_budget_ns",
        "_shared",
        "_waits",
        "_last_wait_ns",
    )

    def __init__(
        self,
        sock: socket.socket,
        decode: Decode,
        poll_ns: int = 0,
        on_error: Callable[[ValueError], None] | None = None,
        spare_poll_ns: int = 0,
    ) -> None:
        self._sock = sock
        self._decoder = FrameDecoder(decode, on_error)
        self._ready: deque[Any] = deque()
        self._poll_ns = poll_ns
        self._spare_poll_ns = max(spare_poll_ns, poll_ns)
        self._budget_ns = poll_ns
        self._shared = 0.5
        self._waits = 0
        self._last_wait_ns = poll_ns  # no polling before the first message

    def next(self, poll_ns: int = 0) -> Any:
        if not self._ready:
            if poll_ns or self._poll_ns:
                self._wait_polling(poll_ns)
            while not self._ready:
                self._receive(0)
        return self._ready.popleft()

    def _wait_polling(self, poll_ns: int) -> None:
        started = time.monotonic_ns()
        last = self._last_wait_ns
        budget = self._budget_ns
        if poll_ns and last >= poll_ns:
            poll_ns = 0
        if not poll_ns:
            self._waits += 1
            if last < budget:
                poll_ns = budget
            elif budget < self._spare_poll_ns and not self._waits & _PROBE_EVERY:
                poll_ns = self._spare_poll_ns  # now and then: has the core time to spare again?
        if poll_ns:
            if self._spare_poll_ns > self._poll_ns:
                cpu_started = time.thread_time_ns()
                self._poll(started + poll_ns)
                self._note_share(time.thread_time_ns() - cpu_started, time.monotonic_ns() - started)
            else:
                self._poll(started + poll_ns)
        while not self._ready:
            self._receive(0)
        self._last_wait_ns = time.monotonic_ns() - started

    def _poll(self, deadline: int) -> None:
        while not self._ready:
            try:
                self._receive(socket.MSG_DONTWAIT)
            except BlockingIOError:
                if time.monotonic_ns() >= deadline:
                    return
                os.sched_yield()

    def _note_share(self, cpu_ns: int, wall_ns: int) -> None:
        """Count one poll of ``wall_ns`` that had ``cpu_ns`` of CPU time in the running
        share of polls that found the core shared, and choose the next polls' budget."""
        if wall_ns < _SHARE_MIN_NS:
            return
        shared = self._shared * (1 - _SHARED_WEIGHT)
        if cpu_ns * 4 < wall_ns * 3:
            shared += _SHARED_WEIGHT
        self._shared = shared
        self._budget_ns = self._poll_ns if shared >= _SHARED_AT_MOST else self._spare_poll_ns

    def _receive(self, flags: int) -> None:
        data = self._sock.recv(1 << 16, flags)
        if not data:
            raise EOFError("peer closed the control socket")
        self._ready.extend(self._decoder.feed(data))


def send_message(sock: socket.socket, message: Any) -> None:
    """Send one message (a ``messages`` struct), blocking."""
    sock.sendall(encode(message))


def send_fd(sock: socket.socket, fd: int) -> None:
    socket.send_fds(sock, [b"F"], [fd])


def recv_fd(sock: socket.socket) -> int:
    msg, fds, _flags, _addr = socket.recv_fds(sock, 1, 1)
    if not msg or not fds:
        raise EOFError("peer closed the descriptor socket")
    return fds[0]
