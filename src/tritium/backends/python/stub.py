"""The instance worker: runs one model instance's ``model.py`` in its own process.

Started by the server as ``python -m tritium.backends.python.stub CTL_FD FDS_FD PARENT_PID
CALL_FD``; CALL_FD carries the requests model code makes of the server (BLS).
It answers the typed control messages of ``tritium.ipc.messages`` on CTL_FD (``Load``,
``Init``, ``Exec``, ``Continue``, ``Fini``), receives arena file descriptors on FDS_FD, reads inputs from the input arena as numpy views and writes outputs
into the output arena. Model code's prints go to this process's stdout/stderr, which the
server shares, so they land in the server log.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import os
import signal
import socket
import sys
import threading
import traceback
from typing import Any

from tritium.backends.python import bls
from tritium.backends.python.model_host import ModelHost
from tritium.backends.python.notices import ONE_WAY, send_notices
from tritium.backends.python.response_sender import ResponseStream
from tritium.core.heap import settle_heap
from tritium.ipc import Arena, MessageReader, recv_fd, send_message
from tritium.ipc.messages import (
    Bye,
    Continue,
    Error,
    Exec,
    Fini,
    Init,
    Initialized,
    Load,
    Loaded,
    NewArena,
    Result,
    ToServer,
    ToWorker,
    Unmap,
    decode_to_worker,
)


def _die_with_parent(parent_pid: int) -> None:
    """Ask the kernel to kill this worker if the server dies (Linux prctl)."""
    with contextlib.suppress(Exception):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG
    if os.getppid() != parent_pid:
        os._exit(1)


class Worker:
    def __init__(
        self,
        ctl: socket.socket,
        fds: socket.socket,
        poll_us: int = 0,
        hinted_poll_us: int = 0,
        spare_poll_us: int = 0,
    ) -> None:
        self.ctl = ctl
        self.fds = fds
        self.arenas: dict[str, Arena] = {}
        # Shared arenas (an ensemble step's outputs, this worker's or another's), by id.
        self.shared: dict[int, Arena] = {}
        self.host: ModelHost | None = None
        self.reader = MessageReader(
            ctl,
            decode_to_worker,
            poll_us * 1000,
            self._undecodable,
            spare_poll_us * 1000,
        )
        # After a batch the server marked "poll" (one client's request was all it had in
        # flight, or its loop polls too), poll this long for the next one.
        self._hinted_poll_ns = hinted_poll_us * 1000
        # Replies and decoupled responses (sent from any thread) share the socket.
        self._send_lock = threading.Lock()
        self.responses = ResponseStream(self.send, fds)

    def send(self, message: ToServer) -> None:
        with self._send_lock:
            send_message(self.ctl, message)

    def _undecodable(self, exc: ValueError) -> None:
        """A message this worker cannot read (a bug of the server's): the server, which
        waits for a reply, gets the error."""
        print(f"tritium worker: {exc}", file=sys.stderr, flush=True)
        self.send(_error_reply(exc))

    def run(self) -> None:
        poll_ns = 0
        while True:
            message = self._next(poll_ns)
            if message is None:
                self._finalize_quietly()
                return
            reply = self._handle(message)
            poll_ns = self._answer(message, reply)
            if type(message) is Fini:
                return
            if type(message) is Init and self.host is not None and self.host.serves_coroutines:
                # An ``async def execute``: from now on the loop runs as a task of the
                # model's event loop, which awaits each execution.
                host = self.host
                try:
                    host.coroutines.serve(self._serve(poll_ns))
                finally:
                    host.stop_coroutines()
                return

    async def _serve(self, poll_ns: int) -> None:
        """:meth:`run`'s loop as a coroutine: replies that are coroutines are awaited."""
        while True:
            message = self._next(poll_ns)
            if message is None:
                finishing = self._finalize_quietly()
                if finishing is not None:
                    await self._bye_after(finishing)
                return
            reply = self._handle(message)
            if asyncio.iscoroutine(reply):
                try:
                    reply = await reply
                except Exception as exc:  # noqa: BLE001 - every failure becomes a reply
                    reply = _error_reply(exc)
            poll_ns = self._answer(message, reply)
            if type(message) is Fini:
                return

    def _next(self, poll_ns: int) -> ToWorker | None:
        """The next message to answer (arenas and one-way messages are applied on the
        way); None once the server is gone."""
        while True:
            try:
                message = self.reader.next(poll_ns)
            except (EOFError, ConnectionError, OSError):
                return None
            kind = type(message)
            if kind is NewArena:
                self._take_arena(message)  # type: ignore[arg-type]
            elif kind is Unmap:
                arena = self.shared.pop(message.id, None)  # type: ignore[union-attr]
                if arena is not None:
                    arena.close()
            elif kind in ONE_WAY:
                ONE_WAY[kind](message)
            else:
                return message

    def _handle(self, message: ToWorker) -> Any:
        try:
            return self.dispatch(message)
        except Exception as exc:  # noqa: BLE001 - every failure becomes a reply
            return _error_reply(exc)

    def _answer(self, message: ToWorker, reply: ToServer) -> int:
        """Send ``reply``; how long to poll for the next message."""
        send_notices(self.send)
        self.send(reply)
        return self._hinted_poll_ns if type(message) is Exec and message.poll else 0

    def _take_arena(self, message: NewArena) -> None:
        fd = recv_fd(self.fds)
        which = message.which
        if which == "shared":
            self.shared[message.id] = Arena(fd, message.size)
            return
        old = self.arenas.get(which)
        self.arenas[which] = Arena(fd, message.size)
        if old is not None:
            old.close()

    def dispatch(self, message: ToWorker) -> Any:
        """The reply to ``message`` (a coroutine that returns it, for a model served on
        its own event loop)."""
        kind = type(message)
        if kind is Exec:
            return self._execute(message)  # type: ignore[arg-type]
        if kind is Continue:
            assert self.host is not None
            keep = message.keep  # type: ignore[union-attr]
            if keep:
                return self.host.write_pending(self.shared[keep], keep)
            return self.host.write_pending(self.arenas["out"])
        if kind is Load:
            self.host = ModelHost(message)  # type: ignore[arg-type]
            return Loaded(self.host.load())
        if kind is Init:
            assert self.host is not None
            self.host.initialize(message)  # type: ignore[arg-type]
            # The model and its libraries live as long as the worker.
            settle_heap()
            return Initialized(self.host.is_ready())
        if kind is Fini:
            finishing = self._finalize_quietly()
            if finishing is not None:
                return self._bye_after(finishing)
            return Bye()
        raise ValueError(f"control message '{kind.__name__}' needs no reply")

    def _execute(self, message: Exec) -> Any:
        host = self.host
        assert host is not None
        if host.decoupled:
            assert message.slots is not None
            reply = host.execute_decoupled(
                message.requests,
                message.slots,
                self.arenas["in"],
                self.arenas["flags"],
                self.responses,
            )
        elif message.keep or message.refs is not None:
            # An ensemble step's batch (see ``tritium.ipc.shared_arenas``).
            shared = self.shared
            keep = message.keep
            refs = message.refs
            reply = host.execute(
                message.requests,
                self.arenas["in"],
                self.arenas["out"],
                (keep, shared[keep]) if keep else None,
                None if refs is None else (refs, shared),
            )
        else:
            reply = host.execute(message.requests, self.arenas["in"], self.arenas["out"])
        if host.has_readiness_check and type(reply) is Result:
            reply.ready = host.is_ready()
        return reply

    def _finalize_quietly(self) -> Any:
        """Finalize the model, printing what it raises; a coroutine to await when the
        model's ``finalize`` is one and the worker serves on the model's loop."""
        host, self.host = self.host, None
        if host is not None:
            try:
                return host.finalize()
            except Exception:  # noqa: BLE001
                traceback.print_exc()
        return None

    async def _bye_after(self, finishing: Any) -> Bye:
        """Await a coroutine ``finalize``, printing what it raises."""
        try:
            await finishing
        except Exception:  # noqa: BLE001
            traceback.print_exc()
        return Bye()


def _error_reply(exc: Exception) -> Error:
    code = getattr(exc, "code", "INTERNAL")
    if not isinstance(code, str):
        code = "INTERNAL"
    return Error(code, str(exc))


def main(argv: list[str]) -> int:
    ctl_fd, fds_fd, parent_pid = (int(a) for a in argv[:3])
    _die_with_parent(parent_pid)
    # The server handles SIGINT for the whole process group; the worker stops when told to.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    ctl = socket.socket(fileno=ctl_fd)
    fds = socket.socket(fileno=fds_fd)
    poll_us = int(argv[4]) if len(argv) > 4 else 0
    hinted_poll_us = int(argv[5]) if len(argv) > 5 else 0
    spare_poll_us = int(argv[6]) if len(argv) > 6 else 0
    if len(argv) > 3:  # the call channel (BLS, model management)
        bls.install(socket.socket(fileno=int(argv[3])), max(poll_us, hinted_poll_us) * 1000)
    Worker(ctl, fds, poll_us, hinted_poll_us, spare_poll_us).run()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
