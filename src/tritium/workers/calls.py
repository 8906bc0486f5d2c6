"""The server's end of a worker's call channel: requests model code makes (BLS).

Each worker has a ``SOCK_SEQPACKET`` pair beside its control socket. The worker sends a
record per request (see ``tritium.ipc.call_records``); this end reads them on the event
loop without blocking, maps any attached arena, and hands each request to the handler
the server gave it. The handler answers with :meth:`CallChannel.reply`, at any later time
and in any order: a request never waits for the worker's instance to be free, and the
control socket (one batch at a time) is not involved.

A streamed call (BLS to a decoupled model) is answered with :meth:`WorkerCall.send_part`
per response, then one final :meth:`WorkerCall.reply`. The worker may send two records
that are not calls, naming a streamed call by ``call``: ``MoreAnswers`` (model code took
``n`` answers: at most ``MAX_UNREAD`` may be untaken) and ``CancelCall``. Every record's
kind is declared in ``tritium.ipc.messages``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import struct
from collections import deque
from collections.abc import Callable, Sequence

import msgspec

from tritium.ipc.arena import Arena
from tritium.ipc.call_records import (
    MAX_RECORD,
    MAX_UNREAD,
    Tensor,
    attach_tensors,
    decode_record,
    encode_record,
    unpack_tensors,
)
from tritium.ipc.messages import Call, CallReply, CancelCall, MoreAnswers, decode_call

log = logging.getLogger("tritium.workers")

#: Calls one worker may have in flight at once; more are answered UNAVAILABLE at once.
MAX_OPEN_CALLS = 4096


class WorkerCall:
    """One request from model code: its message and its tensors (views that stay valid
    until :meth:`release`)."""

    __slots__ = ("channel", "message", "tensors", "on_abandon", "on_cancel", "unread", "_arena")

    def __init__(
        self,
        channel: CallChannel,
        message: Call,
        tensors: list[Tensor],
        arena: Arena | None,
    ) -> None:
        self.channel = channel
        self.message = message
        self.tensors = tensors
        # Set by the handler: runs if the worker goes away before the call is answered.
        self.on_abandon: Callable[[], object] | None = None
        # Set by open_stream: runs when the worker cancels the call.
        self.on_cancel: Callable[[], object] | None = None
        self.unread = 0  # streamed answers sent that model code has not taken yet
        self._arena = arena

    @property
    def label(self) -> str:
        """The calling worker's label, ``model:version``."""
        return self.channel.label

    def release(self) -> None:
        """The request's tensors are no longer needed."""
        arena, self._arena = self._arena, None
        if arena is not None:
            arena.close()

    def reply(self, message: CallReply, tensors: Sequence[Tensor] = ()) -> None:
        """The answer (a streamed call's last one)."""
        self.release()
        self.channel.open_calls.discard(self)
        if self.on_cancel is not None:
            self.on_cancel = None
            self.channel.streams.pop(self.message.id, None)
        self.channel.reply(self.message.id, message, list(tensors))

    def open_stream(self, on_cancel: Callable[[], object]) -> None:
        """This call is answered by several replies; ``on_cancel`` runs if the worker
        cancels it (it must still end the call with :meth:`reply`)."""
        self.on_cancel = on_cancel
        self.channel.streams[self.message.id] = self

    def send_part(self, message: CallReply, tensors: Sequence[Tensor] = ()) -> bool:
        """One answer of a streamed call, more to follow. False once model code has
        more than ``MAX_UNREAD`` answers untaken: the caller should end the call."""
        message.more = True
        self.unread += 1
        self.channel.reply(self.message.id, message, list(tensors))
        return self.unread <= MAX_UNREAD


CallHandler = Callable[[WorkerCall], None]


class CallChannel:
    def __init__(self, sock: socket.socket, label: str, handler: CallHandler | None) -> None:
        self.sock = sock
        self.label = label
        self._handler = handler
        self._loop = asyncio.get_running_loop()
        self._outbox: deque[tuple[bytes, int | None, Arena | None]] = deque()
        self._writing = False
        self._closed = False
        self.open_calls: set[WorkerCall] = set()
        self.streams: dict[int, WorkerCall] = {}  # open streamed calls by id
        sock.setblocking(False)
        self._loop.add_reader(sock.fileno(), self._readable)

    def _readable(self) -> None:
        while not self._closed:
            try:
                data, fds, _flags, _addr = socket.recv_fds(self.sock, MAX_RECORD, 1)
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                self.close()
                return
            if not data:
                for fd in fds:
                    os.close(fd)
                self.close()
                return
            self._received(data, fds)

    def _received(self, data: bytes, fds: list[int]) -> None:
        arena: Arena | None = None
        tensors: list[Tensor] = []
        try:
            message, inline = decode_record(data, decode_call)
            if not isinstance(message, (MoreAnswers, CancelCall)):
                if fds:
                    arena = Arena(fds[0], message.shm)
                buf = arena.buf if arena is not None else inline
                tensors = unpack_tensors(message.inputs, buf) if message.inputs else []
        except Exception as exc:  # noqa: BLE001 - a malformed record is answered, not fatal
            if arena is not None:
                arena.close()
            else:
                for fd in fds:
                    os.close(fd)
            log.warning("%s: malformed call from model code: %s", self.label, exc)
            call_id = _call_id(data)
            if call_id:
                self.reply(call_id, CallReply(error=("INVALID_ARG", str(exc))), [])
            return
        if isinstance(message, (MoreAnswers, CancelCall)):
            for fd in fds:
                os.close(fd)
            self._stream_notice(message)
            return
        call = WorkerCall(self, message, tensors, arena)
        if self._handler is None:
            call.reply(CallReply(error=("UNSUPPORTED", "calls from model code are not available")))
            return
        if len(self.open_calls) >= MAX_OPEN_CALLS:
            error = f"more than {MAX_OPEN_CALLS} requests from this instance are in flight"
            call.reply(CallReply(error=("UNAVAILABLE", error)))
            return
        self.open_calls.add(call)
        try:
            self._handler(call)
        except Exception as exc:  # noqa: BLE001 - the caller gets the error, the server goes on
            log.exception("%s: handling a call from model code failed", self.label)
            call.reply(CallReply(error=("INTERNAL", str(exc))))

    def _stream_notice(self, message: MoreAnswers | CancelCall) -> None:
        """``MoreAnswers`` or ``CancelCall`` for a streamed call (one already answered is
        ignored)."""
        call = self.streams.get(message.call)
        if call is None:
            return
        if type(message) is MoreAnswers:
            call.unread = max(0, call.unread - message.n)
        elif call.on_cancel is not None:
            call.on_cancel()

    def reply(self, call_id: int, message: CallReply, tensors: list[Tensor]) -> None:
        if self._closed:
            return
        message.id = call_id
        inline, arena = attach_tensors(message, "outputs", tensors)
        record = encode_record(message, inline)
        if len(record) > MAX_RECORD:
            # Too big to arrive whole: the caller gets an error it can read instead.
            if arena is not None:
                arena.close()
                arena = None
            error = f"the response's description exceeds {MAX_RECORD} bytes"
            record = encode_record(CallReply(call_id, ("INTERNAL", error)))
        self._outbox.append((record, arena.fd if arena is not None else None, arena))
        if not self._writing:
            self._flush()

    def _flush(self) -> None:
        while self._outbox and not self._closed:
            record, fd, arena = self._outbox[0]
            try:
                if fd is not None:
                    socket.send_fds(self.sock, [record], [fd])
                else:
                    self.sock.send(record)
            except (BlockingIOError, InterruptedError):
                if not self._writing:
                    self._writing = True
                    self._loop.add_writer(self.sock.fileno(), self._flush)
                return
            except OSError:
                self.close()
                return
            self._outbox.popleft()
            if arena is not None:
                arena.close()  # the worker holds its own descriptor now
        if self._writing:
            self._writing = False
            self._loop.remove_writer(self.sock.fileno())

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        with contextlib.suppress(Exception):
            self._loop.remove_reader(self.sock.fileno())
        if self._writing:
            with contextlib.suppress(Exception):
                self._loop.remove_writer(self.sock.fileno())
        for _, _, arena in self._outbox:
            if arena is not None:
                arena.close()
        self._outbox.clear()
        calls, self.open_calls = self.open_calls, set()
        self.streams.clear()
        for call in calls:
            call.release()
            if call.on_abandon is not None:
                call.on_abandon()
        self.sock.close()


def _call_id(data: bytes) -> int:
    """The id of a call that could not be read, to answer it with the error (0: none)."""
    try:
        (length,) = struct.unpack_from("<I", data)
        return int(msgspec.json.decode(data[4 : 4 + length])["id"])
    except Exception:  # noqa: BLE001 - not even that: nobody to answer
        return 0
