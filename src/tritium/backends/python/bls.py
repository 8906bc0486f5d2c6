"""Model code's end of the call channel: BLS requests and model management, in a worker.

``InferenceRequest.exec`` and ``async_exec`` and ``pb_utils.is_model_ready`` /
``load_model`` / ``unload_model`` send one record each to the server (see
``tritium.ipc.call_records``) and wait for its answer. A reader thread, started with the
first call, takes every answer off the socket and completes the call it belongs to, so
any number of calls can be in flight at once (``async_exec``), from any thread. A
synchronous call reads the socket itself when no one else is reading (the usual case:
``exec()`` from ``execute``), which saves a hand-over between threads per call.

A streamed call (``exec(decoupled=True)``) gets many answers, in order, the last one
marked final; they queue in its :class:`ReplyStream` (see ``bls_streams``), kept apart
from single calls so those pay nothing for it.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import mmap
import os
import socket
import threading
import time
from collections import deque
from collections.abc import Sequence
from concurrent.futures import Future
from typing import Any

from tritium.backends.python.bls_answers import Answer, CallError
from tritium.backends.python.bls_streams import ReplyStream
from tritium.ipc.call_records import (
    MAX_RECORD,
    Tensor,
    attach_tensors,
    decode_record,
    encode_record,
    unpack_tensors,
)
from tritium.ipc.messages import Call as CallMessage
from tritium.ipc.messages import CallReply, CancelCall, MoreAnswers, decode_call_reply

#: How long past a call's own timeout (or at all, without one) a caller waits for the
#: server before giving up on it: the server answers every call, this is for a lost one.
NO_ANSWER_S = 24 * 3600.0

__all__ = ["NO_ANSWER_S", "Answer", "CallClient", "CallError", "ReplyStream"]


class CallClient:
    """Model code's end of the call channel (one per worker; implements ``StreamClient``)."""

    def __init__(self, sock: socket.socket, poll_ns: int = 0) -> None:
        self._sock = sock
        # A synchronous caller polls for its answer this long before it sleeps: the answer
        # of a fast model comes back well within it, and the worker is still awake for it.
        self._poll_ns = poll_ns
        self._send_lock = threading.Lock()
        self._ids = itertools.count(1)
        self._pending: dict[int, Future[Answer]] = {}
        self._pending_lock = threading.Lock()
        self._reader: threading.Thread | None = None
        # Held by whoever is reading the socket: the reader thread or a synchronous caller.
        self._read_lock = threading.Lock()
        self._broken: str | None = None
        # Streamed calls by id (see bls_streams.ReplyStream), and ids of streams whose
        # cancel is still to be sent (dropped while the send lock was taken).
        self._streams: dict[int, ReplyStream] = {}
        self._unsent_cancels: deque[int] = deque()

    def start(
        self,
        message: CallMessage,
        tensors: Sequence[Tensor] = (),
        stream: ReplyStream | None = None,
    ) -> Future[Answer]:
        """Send one call; the future gets its :class:`Answer` or a :class:`CallError`.

        With ``stream`` (a ``ReplyStream``), its answers go to the stream instead and the
        returned future only reports a failure to send.
        """
        future: Future[Answer] = Future()
        if self._broken is not None:
            future.set_exception(CallError("UNAVAILABLE", self._broken))
            return future
        call_id = next(self._ids)
        message.id = call_id
        inline, arena = attach_tensors(message, "inputs", list(tensors))
        record = encode_record(message, inline)
        if len(record) > MAX_RECORD:
            if arena is not None:
                arena.close()
            future.set_exception(
                CallError("INVALID_ARG", f"the request's description exceeds {MAX_RECORD} bytes")
            )
            return future
        with self._pending_lock:
            if stream is None:
                self._pending[call_id] = future
            else:
                stream.call_id = call_id
                self._streams[call_id] = stream
        try:
            with self._send_lock:
                if arena is not None:
                    socket.send_fds(self._sock, [record], [arena.fd])
                else:
                    self._sock.sendall(record)
        except OSError as exc:
            with self._pending_lock:
                self._pending.pop(call_id, None)
                self._streams.pop(call_id, None)
            future.set_exception(CallError("UNAVAILABLE", f"the server is gone: {exc}"))
        finally:
            if arena is not None:
                arena.close()  # the server maps its own descriptor
        if self._unsent_cancels:
            self._send_cancels()
        return future

    def notify(self, message: MoreAnswers | CancelCall) -> None:
        """Send a record that gets no answer (``more`` / ``cancel`` of a streamed call)."""
        if self._broken is not None:
            return
        record = encode_record(message)
        with contextlib.suppress(OSError), self._send_lock:
            self._sock.sendall(record)

    def drop_stream(self, call_id: int) -> None:
        """Forget a streamed call and have the server cancel it. Safe from a finalizer:
        when the send lock is taken (maybe by this very thread), the cancel goes out with
        the next record sent or answer read instead."""
        self._streams.pop(call_id, None)
        self._unsent_cancels.append(call_id)
        self._send_cancels()

    def _send_cancels(self) -> None:
        if not self._send_lock.acquire(blocking=False):
            return
        try:
            while self._unsent_cancels:
                call_id = self._unsent_cancels.popleft()
                if self._broken is None:
                    with contextlib.suppress(OSError):
                        self._sock.sendall(encode_record(CancelCall(call_id)))
        finally:
            self._send_lock.release()

    def wait_stream(self, stream: ReplyStream, deadline: float) -> None:
        """Until ``stream`` has an answer queued: read the socket ourselves when nobody
        reads (as :meth:`call` does), else wait for the reader to deliver."""
        while not stream.ready():
            if time.monotonic() >= deadline:
                raise CallError("UNAVAILABLE", "no answer from the server")
            if self._read_lock.acquire(blocking=False):
                try:
                    while not stream.ready() and self._read_one():
                        pass
                finally:
                    self._read_lock.release()
                if not stream.ready():
                    return  # the channel is gone; the stream heard of it
            else:
                stream.wait(min(max(deadline - time.monotonic(), 0.0), 0.05))

    def call(
        self,
        message: CallMessage,
        tensors: Sequence[Tensor] = (),
        timeout: float | None = None,
    ) -> Answer:
        """:meth:`start` and wait for the answer (raises :class:`CallError`)."""
        future = self.start(message, tensors)
        deadline = time.monotonic() + (NO_ANSWER_S if timeout is None else timeout)
        while not future.done():
            left = deadline - time.monotonic()
            if left <= 0:
                raise CallError("UNAVAILABLE", "no answer from the server")
            if self._read_lock.acquire(blocking=False):
                # Nobody reads: read ourselves until our answer is in (answers to other
                # threads' calls are handed to them on the way).
                try:
                    if self._poll_ns:
                        self._poll_one(self._poll_ns)
                    while not future.done() and self._read_one():
                        pass
                finally:
                    self._read_lock.release()
            else:
                # The reader thread (or another caller) reads and will complete ours; look
                # again now and then in case it stops reading before our answer comes.
                with contextlib.suppress(TimeoutError):
                    future.result(min(left, 0.05))
        return future.result()

    def start_async(
        self, message: CallMessage, tensors: Sequence[Tensor] = ()
    ) -> asyncio.Future[Answer]:
        """:meth:`start`, answered on the running event loop (by the reader thread)."""
        loop = asyncio.get_running_loop()
        self.ensure_reader()
        return asyncio.wrap_future(self.start(message, tensors), loop=loop)

    def ensure_reader(self) -> None:
        if self._reader is None:
            with self._pending_lock:
                if self._reader is None:
                    self._reader = threading.Thread(
                        target=self._read, name="tritium-calls", daemon=True
                    )
                    self._reader.start()

    def _read(self) -> None:
        while True:
            with self._read_lock:
                if not self._read_one():
                    return

    def _poll_one(self, budget_ns: int) -> None:
        """Read and deliver one answer if it arrives within ``budget_ns`` (the caller holds
        the read lock), yielding the CPU while there is none."""
        deadline = time.monotonic_ns() + budget_ns
        while True:
            try:
                self._read_one(socket.MSG_DONTWAIT)
                return
            except BlockingIOError:
                if time.monotonic_ns() >= deadline:
                    return
                os.sched_yield()

    def _read_one(self, flags: int = 0) -> bool:
        """Read and deliver one answer (the caller holds the read lock); False once the
        channel is gone. With ``MSG_DONTWAIT`` in ``flags``, BlockingIOError when none is
        there yet."""
        if self._broken is not None:
            return False
        try:
            data, fds, _flags, _addr = socket.recv_fds(self._sock, MAX_RECORD, 1, flags)
        except BlockingIOError:
            raise
        except OSError as exc:
            self._fail_all(f"the call channel failed: {exc}")
            return False
        if not data:
            self._fail_all("the server closed the call channel")
            return False
        self._answer(data, fds)
        return True

    def _answer(self, data: bytes, fds: list[int]) -> None:
        message, inline = decode_record(data, decode_call_reply)
        call_id = message.id
        with self._pending_lock:
            future = self._pending.pop(call_id, None)
        if future is None:
            stream = self._streams.get(call_id)
            if stream is not None or fds:
                self._stream_answer(stream, message, inline, fds)
            if self._unsent_cancels:
                self._send_cancels()
            return
        try:
            tensors = _tensors(message, inline, fds)
        except Exception as exc:  # noqa: BLE001 - the caller hears of it
            if not future.done():
                future.set_exception(CallError("INTERNAL", f"malformed answer: {exc}"))
            return
        if future.done():
            return
        error = message.error
        if error is not None:
            future.set_exception(CallError(str(error[0]), str(error[1])))
        else:
            future.set_result(Answer(message, tensors))

    def _stream_answer(
        self,
        stream: ReplyStream | None,
        message: CallReply,
        inline: memoryview,
        fds: list[int],
    ) -> None:
        final = not message.more
        if stream is None:  # dropped: only close what came with it
            for fd in fds:
                os.close(fd)
            return
        if final:
            self._streams.pop(stream.call_id, None)
        try:
            tensors = _tensors(message, inline, fds)
        except Exception as exc:  # noqa: BLE001 - the caller hears of it
            stream.deliver(CallError("INTERNAL", f"malformed answer: {exc}"), final)
            return
        error = message.error
        if error is not None:
            stream.deliver(CallError(str(error[0]), str(error[1])), final)
        else:
            stream.deliver(Answer(message, tensors), final)

    def _fail_all(self, reason: str) -> None:
        self._broken = reason
        with self._pending_lock:
            pending, self._pending = self._pending, {}
            streams, self._streams = self._streams, {}
        for future in pending.values():
            if not future.done():
                future.set_exception(CallError("UNAVAILABLE", reason))
        for stream in streams.values():
            stream.deliver(CallError("UNAVAILABLE", reason), True)


def _tensors(message: CallReply, inline: memoryview, fds: list[int]) -> list[Tensor]:
    """An answer's output tensors, in memory model code may change (an arena is mapped
    privately, inline bytes copied: writable arrays, as Triton's are)."""
    if fds:
        try:
            buf: Any = mmap.mmap(fds[0], message.shm, flags=mmap.MAP_PRIVATE)
        finally:
            os.close(fds[0])
    else:
        buf = bytearray(inline)
    descriptors = message.outputs
    return unpack_tensors(descriptors, buf) if descriptors else []


_client: CallClient | None = None


def install(sock: socket.socket, poll_ns: int = 0) -> None:
    """Called once by the worker with its end of the call channel."""
    global _client
    _client = CallClient(sock, poll_ns)


def client() -> CallClient:
    if _client is None:
        raise CallError("UNAVAILABLE", "this process has no call channel to the server")
    return _client
