"""Starting and ending one worker's OS process, and its control socket on the event loop.

:func:`launch` spawns ``tritium.backends.python.stub`` with its three socket pairs (control,
arena descriptors, calls from model code) and returns the server's ends; :func:`reap`
makes sure the process is gone (its deadline, then TERM, then KILL).
:class:`ControlProtocol` turns the control socket's bytes into typed messages.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import subprocess
import sys
from collections.abc import Callable
from typing import NamedTuple

from tritium.core.errors import Unavailable
from tritium.ipc import FrameDecoder
from tritium.ipc.messages import ToServer, decode_to_server
from tritium.workers.execution_env import WorkerPython

log = logging.getLogger("tritium.workers")

# A process that outlives its deadline gets this long after TERM (and again after KILL).
_TERM_GRACE_S = 0.25


class WorkerDied(Unavailable):
    pass


class Launched(NamedTuple):
    """A started worker and the server's ends of its sockets."""

    proc: subprocess.Popen[bytes]
    control: socket.socket  # framed messages, both ways
    descriptors: socket.socket  # arena descriptors, to the worker and back
    calls: socket.socket  # SOCK_SEQPACKET records of calls from model code


def launch(
    env: dict[str, str] | None,
    poll_us: int,
    hinted_poll_us: int,
    python: WorkerPython | None = None,
    spare_poll_us: int = 0,
) -> Launched:
    """Spawn one worker process (``env``: its environment, None for the server's;
    ``python``: the model's own interpreter, None for the server's)."""
    ctl_parent, ctl_child = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    fd_parent, fd_child = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    call_parent, call_child = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    try:
        environ = dict(os.environ if env is None else env)
        environ["PYTHONUNBUFFERED"] = "1"
        if python is not None:
            environ = python.environ(environ)
        cmd = [
            sys.executable if python is None else python.executable,
            "-m",
            "tritium.backends.python.stub",
            str(ctl_child.fileno()),
            str(fd_child.fileno()),
            str(os.getpid()),
            str(call_child.fileno()),
            str(poll_us),
            str(hinted_poll_us),
            str(spare_poll_us),
        ]
        # A session of its own: where the kernel groups scheduling by session
        # (autogroup), the server's event loop then keeps its own share of the CPU
        # instead of dividing one with every instance's process. The worker still dies
        # with the server (PR_SET_PDEATHSIG) and ignores terminal signals as before.
        proc = subprocess.Popen(
            cmd,
            pass_fds=(ctl_child.fileno(), fd_child.fileno(), call_child.fileno()),
            env=environ,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
    except BaseException:
        for sock in (ctl_parent, fd_parent, call_parent):
            sock.close()
        raise
    finally:
        ctl_child.close()
        fd_child.close()
        call_child.close()
    return Launched(proc, ctl_parent, fd_parent, call_parent)


async def exited(proc: subprocess.Popen[bytes], timeout: float) -> bool:
    """Wait up to ``timeout`` seconds for ``proc`` to exit (and reap it)."""
    deadline = asyncio.get_running_loop().time() + timeout
    while proc.poll() is None:
        if asyncio.get_running_loop().time() >= deadline:
            return False
        await asyncio.sleep(0.01)
    return True


async def reap(proc: subprocess.Popen[bytes], timeout: float) -> None:
    """Until ``proc`` is gone: ``timeout`` seconds (at least 0.1) for it to exit, then
    TERM, then KILL, each with a short grace."""
    if not await exited(proc, max(timeout, 0.1)):
        proc.terminate()
        if not await exited(proc, _TERM_GRACE_S):
            proc.kill()
            await exited(proc, _TERM_GRACE_S)


class ControlProtocol(asyncio.Protocol):
    """Receives the worker's framed messages and hands each to ``on_message``; one of a
    kind this server does not know is logged and dropped."""

    def __init__(
        self, label: str, on_message: Callable[[ToServer], None], on_lost: Callable[[], None]
    ) -> None:
        self._label = label
        self._decoder = FrameDecoder(decode_to_server)
        self._on_message = on_message
        self._on_lost = on_lost
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        try:
            messages = self._decoder.feed(data)
        except ValueError as exc:
            log.warning("%s: %s", self._label, exc)
            return
        for message in messages:
            self._on_message(message)

    def connection_lost(self, exc: Exception | None) -> None:
        self._on_lost()
