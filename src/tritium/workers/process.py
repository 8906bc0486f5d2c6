"""One instance worker process as seen from the server's event loop.

The server owns every shared-memory arena (so a killed worker can leak nothing) and talks to
the worker over a socketpair with framed messages; a second socketpair carries arena file
descriptors. Exactly one batch is in flight per worker at a time: the pool guarantees it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import subprocess
import sys
from collections.abc import Callable
from functools import partial
from typing import Any

from tritium.core import InferRequest, InferResponse
from tritium.core.completion import Completion
from tritium.core.errors import InternalError, TritiumError, Unavailable, error_from_code
from tritium.ipc import Arena, FrameDecoder, encode, grow_size, send_fd
from tritium.ipc import tensors as ipc_tensors
from tritium.workers.batch_messages import Layout, read_responses, write_batch
from tritium.workers.calls import CallChannel, CallHandler
from tritium.workers.notices import handle_notice
from tritium.workers.output_pool import OutputPoolStatistics
from tritium.workers.response_streams import ResponseStreams
from tritium.workers.step_tensors import StepTensors, has_steps

log = logging.getLogger("tritium.workers")

_INITIAL_ARENA = 1 << 20
_NO_TIMING = [0, 0, 0]
_LAYOUT_CACHE = 256
# Answers of this many bytes or more are copied out of the output arena a slice per loop
# iteration, as big inputs are written (a 64 MiB copy held the loop ~40 ms).
SLICED_READ_BYTES = ipc_tensors.SLICED_WRITE_BYTES
_FLAGS_ARENA = 4096  # one cancellation byte per decoupled request slot
# Shutdown: a finalize that starts with no time left still gets this long, and a process
# that outlives its deadline this long after TERM (and again after KILL).
_MIN_FINALIZE_S = 0.25
_TERM_GRACE_S = 0.25


async def _exited(proc: subprocess.Popen[bytes], timeout: float) -> bool:
    """Wait up to ``timeout`` seconds for ``proc`` to exit (and reap it)."""
    deadline = asyncio.get_running_loop().time() + timeout
    while proc.poll() is None:
        if asyncio.get_running_loop().time() >= deadline:
            return False
        await asyncio.sleep(0.01)
    return True


class _ControlProtocol(asyncio.Protocol):
    """Receives framed replies and hands them to the waiting call."""

    def __init__(self, on_message: Callable[[Any], None], on_lost: Callable[[], None]) -> None:
        self._decoder = FrameDecoder()
        self._on_message = on_message
        self._on_lost = on_lost
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        for message in self._decoder.feed(data):
            self._on_message(message)

    def connection_lost(self, exc: Exception | None) -> None:
        self._on_lost()


class WorkerDied(Unavailable):
    pass


class WorkerProcess:
    """Spawns and drives one ``tritium.backends.python.stub`` process."""

    def __init__(
        self,
        label: str,
        *,
        env: dict[str, str] | None = None,
        calls: CallHandler | None = None,
        poll_us: int = 0,
        lone_poll_us: int = 0,
        lone: Callable[[], bool] | None = None,
    ) -> None:
        self.label = label
        # How long the worker polls for its next message before it sleeps (see
        # ``MessageReader``): ``poll_us`` when its last wait was shorter than that, and
        # ``lone_poll_us`` after a batch sent while ``lone()`` said that one client's
        # request is all the server has in flight (its next request comes soon).
        self._poll_us = poll_us
        self._lone_poll_us = lone_poll_us
        self._lone = lone if lone_poll_us else None
        self._env = env
        # Requests model code makes of the server (BLS) arrive on a channel of their own.
        self._call_handler = calls
        self._calls: CallChannel | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._transport: asyncio.Transport | None = None
        self._fd_sock: socket.socket | None = None
        self._pending: asyncio.Future[Any] | None = None
        # The batch in flight and the future its responses go to (at most one).
        self._batch: tuple[list[InferRequest], Completion[list[InferResponse]]] | None = None
        # layout_key -> (exec messages without and with the poll hint, input offsets,
        # input sizes, arena end) of a single request with fixed-size inputs, reused for
        # every request of the same layout.
        self._layouts: dict[object, Layout] = {}
        self._in_arena: Arena | None = None
        # Big inputs of the batch being started, written a slice per loop iteration.
        self._sliced = ipc_tensors.SlicedWrites()
        self._out_arena: Arena | None = None
        self._retired: list[Arena] = []
        # Ensemble steps' large tensors, kept in shared arenas (see ``StepTensors``).
        self._steps = StepTensors(self._send, self.post, lambda: self._fd_sock, self._grow_out)
        self._alive = False
        # What the model's optional is_ready() said last (after init and each execution).
        self.model_ready = True
        # Worker-measured ns of the last batch: building inputs, execute(), writing outputs.
        self.last_timing: list[int] = _NO_TIMING
        self.on_exit: Callable[[WorkerProcess], None] | None = None
        #: Messages the worker sends of its own accord, by ``op`` (decoupled responses,
        #: and any other kind a feature adds); everything else answers a call or a batch.
        self.handlers: dict[str, Callable[[dict[str, Any]], None]] = {
            "notice": partial(handle_notice, label)
        }
        #: The open requests of a decoupled model (None for every other model).
        self.streams: ResponseStreams | None = None

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc else None

    @property
    def alive(self) -> bool:
        return self._alive

    @property
    def busy(self) -> bool:
        """A batch is in flight."""
        return self._batch is not None

    async def spawn(self) -> None:
        loop = asyncio.get_running_loop()
        ctl_parent, ctl_child = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        fd_parent, fd_child = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        call_parent, call_child = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            env = dict(os.environ if self._env is None else self._env)
            env["PYTHONUNBUFFERED"] = "1"
            cmd = [
                sys.executable,
                "-m",
                "tritium.backends.python.stub",
                str(ctl_child.fileno()),
                str(fd_child.fileno()),
                str(os.getpid()),
                str(call_child.fileno()),
                str(self._poll_us),
                str(self._lone_poll_us),
            ]
            # A session of its own: where the kernel groups scheduling by session
            # (autogroup), the server's event loop then keeps its own share of the CPU
            # instead of dividing one with every instance's process. The worker still dies
            # with the server (PR_SET_PDEATHSIG) and ignores terminal signals as before.
            self._proc = subprocess.Popen(
                cmd,
                pass_fds=(ctl_child.fileno(), fd_child.fileno(), call_child.fileno()),
                env=env,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        finally:
            ctl_child.close()
            fd_child.close()
            call_child.close()
        self._fd_sock = fd_parent
        self._calls = CallChannel(call_parent, self.label, self._call_handler)
        self._alive = True
        transport, _ = await loop.create_unix_connection(
            lambda: _ControlProtocol(self._on_message, self._on_lost), sock=ctl_parent
        )
        self._transport = transport  # type: ignore[assignment]
        self._in_arena = self._new_arena("in", _INITIAL_ARENA)
        self._out_arena = self._new_arena("out", _INITIAL_ARENA)

    # -- messaging --------------------------------------------------------------------

    def _on_message(self, message: Any) -> None:
        handlers = self.handlers
        if handlers:
            handler = handlers.get(message.get("op"))
            if handler is not None:
                handler(message)
                return
        if self._batch is not None:
            self._on_batch_message(message)
            return
        fut = self._pending
        self._pending = None
        if fut is not None and not fut.done():
            fut.set_result(message)
        else:
            log.warning("%s: unexpected message from worker: %.200r", self.label, message)

    def _on_lost(self) -> None:
        if not self._alive:
            return
        self._alive = False
        died = WorkerDied(f"instance '{self.label}' exited unexpectedly")
        fut = self._pending
        self._pending = None
        if fut is not None and not fut.done():
            fut.set_exception(died)
        batch = self._batch
        self._batch = None
        # The instance hears of the exit first: the batch's callbacks run synchronously
        # and must already see it not running (they park the scheduler until a restart).
        if self.on_exit is not None:
            self.on_exit(self)
        if batch is not None and not batch[1].done():
            batch[1].set_exception(died)
        if self.streams is not None:
            self.streams.fail_all(died)

    async def call(self, message: Any, timeout: float | None = None) -> Any:
        """Send one message and wait for the reply (raises the worker's error)."""
        if not self._alive or self._transport is None:
            raise WorkerDied(f"instance '{self.label}' is not running")
        fut = asyncio.get_running_loop().create_future()
        self._pending = fut
        self._transport.write(encode(message))
        if timeout is None:
            reply = await fut
        else:
            reply = await asyncio.wait_for(fut, timeout)
        if reply.get("op") == "error":
            raise error_from_code(reply.get("code", "INTERNAL"), reply["message"])
        return reply

    def post(self, message: dict[str, Any]) -> None:
        """Send a message that gets no reply; the worker applies it between batches."""
        if self._alive and self._transport is not None:
            self._send(message)

    def _send(self, message: Any) -> None:
        assert self._transport is not None
        self._transport.write(encode(message))

    def _new_arena(self, which: str, size: int) -> Arena:
        arena = Arena.create(size)
        assert self._fd_sock is not None
        # Descriptor first, then the message that tells the worker to pick it up.
        send_fd(self._fd_sock, arena.fd)
        self._send({"op": "arena", "which": which, "size": size})
        return arena

    def output_statistics(self) -> OutputPoolStatistics | None:
        """The shared output arenas' counters (None before the first large step batch)."""
        return self._steps.statistics()

    @property
    def referenced_inputs(self) -> tuple[int, int]:
        """Inputs this worker read in place from a shared arena, and their bytes."""
        return self._steps.referenced

    def _grow_out(self, needed: int) -> None:
        out = self._out_arena
        if out is None or needed > out.size:
            self._replace_arena("out", needed)

    def _replace_arena(self, which: str, needed: int) -> Arena:
        old = self._in_arena if which == "in" else self._out_arena
        arena = self._new_arena(which, grow_size(needed, _INITIAL_ARENA))
        if old is not None:
            old.close()
        if which == "in":
            self._in_arena = arena
        else:
            self._out_arena = arena
        return arena

    # -- life cycle -------------------------------------------------------------------

    async def load(self, spec: dict[str, Any], timeout: float) -> dict[str, Any]:
        """Import model.py (and auto-complete its config); returns the worker's reply."""
        return await self.call({"op": "load", **spec}, timeout)

    async def initialize(self, spec: dict[str, Any], timeout: float) -> None:
        policy = spec.get("config", {}).get("model_transaction_policy", {})
        if policy.get("decoupled") and self.streams is None:
            assert self._fd_sock is not None
            flags = self._new_arena("flags", _FLAGS_ARENA)
            self.streams = ResponseStreams(self.label, flags, self._fd_sock)
            self.handlers["resp"] = self.streams.on_response
        reply = await self.call({"op": "init", **spec}, timeout)
        self.model_ready = bool(reply.get("ready", True))

    async def stop(self, timeout: float) -> None:
        """Run finalize, then make sure the process is gone: all of it within ``timeout``
        seconds, plus at most ~0.6 s to finalize an idle model when no time is left and to
        stop a process that ignores its deadline (TERM, then KILL)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        if self._alive:
            with contextlib.suppress(TritiumError, asyncio.TimeoutError, OSError):
                await self.call({"op": "fini"}, max(timeout, _MIN_FINALIZE_S))
        await self._reap(deadline - loop.time())

    async def _reap(self, timeout: float) -> None:
        proc = self._proc
        self._alive = False
        if self.streams is not None:
            # Decoupled requests the model never ended end now, not never.
            self.streams.fail_all(Unavailable(f"instance '{self.label}' was stopped"))
        batch, self._batch = self._batch, None
        if batch is not None and not batch[1].done():
            batch[1].set_exception(Unavailable(f"instance '{self.label}' is stopping"))
        if self._transport is not None:
            self._transport.close()
            self._transport = None
        if proc is not None and not await _exited(proc, max(timeout, 0.1)):
            proc.terminate()
            if not await _exited(proc, _TERM_GRACE_S):
                proc.kill()
                await _exited(proc, _TERM_GRACE_S)
        self._close_arenas()

    def kill(self) -> None:
        """Synchronous last resort when a graceful stop did not happen."""
        if self._proc is not None and self._proc.poll() is None:
            self._proc.kill()
            with contextlib.suppress(Exception):
                self._proc.wait(5)
        self._close_arenas()

    def _close_arenas(self) -> None:
        if self.streams is not None:
            self.streams.close()
        if self._calls is not None:
            self._calls.close()
            self._calls = None
        for arena in (self._in_arena, self._out_arena, *self._retired):
            if arena is not None:
                arena.close()
        self._in_arena = self._out_arena = None
        self._retired.clear()
        self._steps.close()
        if self._fd_sock is not None:
            self._fd_sock.close()
            self._fd_sock = None

    # -- execution --------------------------------------------------------------------

    def submit(self, batch: list[InferRequest]) -> Completion[list[InferResponse]]:
        """Start one batch now (synchronously: inputs written, message sent) and return
        its completion, which gets one response per request and runs its callbacks the
        moment the reply arrives. Model errors arrive as per-response errors; the batch
        fails only when the worker is gone or the reply is malformed."""
        if not self._alive or self._transport is None:
            raise WorkerDied(f"instance '{self.label}' is not running")
        if self._batch is not None or self._pending is not None:
            raise InternalError(f"instance '{self.label}' is busy")
        poll = self._lone is not None and self._lone()
        streams = self.streams
        sliced = self._sliced
        if sliced.items:  # left by a batch whose writing failed
            sliced.clear()
        if streams is not None:
            frame, _ = write_batch(
                batch, self._arena_for_inputs, streams.open(batch), poll, sliced=sliced
            )
        else:
            frame = None
            if batch[0].ensemble_step or (len(batch) > 1 and has_steps(batch)):
                frame = self._steps.write(batch, poll, self._arena_for_inputs)
            if frame is None and len(batch) == 1:
                frame = self._write_cached(batch[0], poll)
            if frame is None:
                frame = self._write_batch(batch, poll)
        done: Completion[list[InferResponse]] = Completion()
        self._batch = (batch, done)
        if sliced.items:
            self._write_slices(frame, done)
        else:
            self._transport.write(frame)
        return done

    def _write_slices(self, frame: bytes, done: Completion[list[InferResponse]]) -> None:
        """Write the batch's big inputs a slice per loop iteration, then send ``frame``;
        given up when the batch ends first (the worker stopped or died)."""
        current = self._batch
        sliced = self._sliced
        if current is None or current[1] is not done or done.done():
            # Ended first. Its writes are dropped, unless a newer batch owns them now.
            if current is None:
                sliced.clear()
            return
        arena = self._in_arena
        if arena is None or arena.buf is None or self._transport is None:
            sliced.clear()
            return
        if sliced.step(arena.buf):
            sliced.clear()
            self._transport.write(frame)
            return
        asyncio.get_running_loop().call_soon(self._write_slices, frame, done)

    def _write_cached(self, request: InferRequest, poll: bool) -> bytes | None:
        """For a request whose layout was seen before (same ``layout_key``: names, types,
        shapes, outputs, id, parameters), write its inputs where they went last time and
        reuse that exec message as is; None when there is nothing to reuse."""
        key = request.layout_key
        if key is None:
            return None
        cached = self._layouts.get(key)
        if cached is None:
            return None
        frames, offsets, sizes, end = cached
        arena = self._in_arena
        inputs = request.inputs
        if arena is None or end > arena.size or len(inputs) != len(sizes):
            return None
        for tensor, size in zip(inputs, sizes):
            if tensor.data.nbytes != size:
                return None
        buf = arena.buf
        buf[0] = 0
        write = ipc_tensors.write
        big = ipc_tensors.SLICED_WRITE_BYTES
        for tensor, off, size in zip(inputs, offsets, sizes):
            if size >= big:
                self._sliced.add(off, tensor.data, None)
            else:
                write(buf, off, tensor.data, None)
        return frames[poll]

    def _write_batch(self, batch: list[InferRequest], poll: bool) -> bytes:
        frame, layout = write_batch(batch, self._arena_for_inputs, None, poll, sliced=self._sliced)
        key = batch[0].layout_key
        if layout is not None and key is not None:
            if len(self._layouts) >= _LAYOUT_CACHE:
                self._layouts.clear()
            self._layouts[key] = layout
        return frame

    def _arena_for_inputs(self, size: int) -> Arena:
        arena = self._in_arena
        if arena is None or size > arena.size:
            arena = self._replace_arena("in", size)
        return arena

    def cancel(self, request: InferRequest) -> None:
        """Raise the cancellation flag the model sees through ``request.is_cancelled()``."""
        if self.streams is not None:
            self.streams.cancel(request)
            return
        if self._batch is None or self._in_arena is None or self._in_arena.buf is None:
            return
        for index, queued in enumerate(self._batch[0]):
            if queued is request:
                self._in_arena.buf[index] = 1
                return

    def _on_batch_message(self, message: dict[str, Any]) -> None:
        op = message.get("op")
        if op == "need":
            if message.get("keep"):
                self._send(self._steps.need(int(message["size"])))
                return
            # Outputs did not fit: give the worker a bigger output arena and let it go on.
            self._replace_arena("out", int(message["size"]))
            self._send({"op": "continue"})
            return
        assert self._batch is not None
        batch, fut = self._batch
        self._batch = None
        if fut.done() or op == "error":
            # No responses to read (a shared arena lent for them goes back to its pool).
            if self._steps.in_flight:
                self._steps.failed()
            if not fut.done():
                error = error_from_code(message.get("code", "INTERNAL"), message["message"])
                fut.set_exception(error)
            return
        steps = self._steps
        kept = steps.kept(message) if steps.in_flight else None
        end = message.get("end", 0)
        out = self._out_arena
        if (
            kept is None
            and type(end) is int
            and SLICED_READ_BYTES <= end
            and out is not None
            and end <= out.size
        ):
            # A big answer: copied out of the output arena a slice per loop iteration, so
            # other clients are not held up; the instance stays busy until it is done.
            self._batch = (batch, fut)
            copy = ipc_tensors.SlicedWrites()
            copy.add(0, None, memoryview(out.buf)[:end])
            self._read_slices(message, bytearray(end), copy)
            return
        self._settle(batch, fut, message, kept)

    def _read_slices(
        self, message: dict[str, Any], block: bytearray, copy: ipc_tensors.SlicedWrites
    ) -> None:
        current = self._batch
        if current is None or current[1].done():
            return  # the worker died or stopped meanwhile: the batch has failed
        out = self._out_arena
        if out is None or out.buf is None:
            self._batch = None
            current[1].set_exception(WorkerDied(f"instance '{self.label}' is not running"))
            return
        if not copy.step(block):
            asyncio.get_running_loop().call_soon(self._read_slices, message, block, copy)
            return
        self._batch = None
        self._settle(current[0], current[1], message, block)

    def _settle(
        self,
        batch: list[InferRequest],
        fut: Completion[list[InferResponse]],
        message: dict[str, Any],
        block: Any,
    ) -> None:
        """Complete ``fut`` with the reply's responses (views of ``block`` when given,
        else of a copy of the output arena)."""
        ready = message.get("ready")
        if ready is not None:
            self.model_ready = bool(ready)
        self.last_timing = message.get("t") or _NO_TIMING
        try:
            responses = self._read_responses(batch, message, block)
        except Exception as exc:  # noqa: BLE001 - a malformed reply fails the batch, not us
            log.exception("%s: malformed reply from worker", self.label)
            fut.set_exception(
                InternalError(f"instance '{self.label}' returned a malformed reply: {exc}")
            )
            return
        # Runs the scheduler's callback now, which may submit the next batch to this worker.
        fut.set_result(responses)

    def _read_responses(
        self, batch: list[InferRequest], reply: dict, block: Any = None
    ) -> list[InferResponse]:
        if block is not None:
            return read_responses(batch, reply, None, self.label, block)
        out = self._out_arena
        return read_responses(batch, reply, out.buf if out is not None else None, self.label)
