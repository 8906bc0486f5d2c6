"""One instance worker process as seen from the server's event loop.

The server owns every shared-memory arena (so a killed worker can leak nothing) and talks to
the worker over a socketpair with typed messages (``ipc.messages``); a second socketpair
carries arena file descriptors. Exactly one batch is in flight per worker at a time: the
pool guarantees it; ``batch_results`` settles it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import subprocess
from collections.abc import Callable
from typing import Any

from tritium.core import InferRequest, InferResponse
from tritium.core.completion import Completion
from tritium.core.errors import InternalError, TritiumError, Unavailable, error_from_code
from tritium.core.heap import collect_released
from tritium.ipc import encode
from tritium.ipc.messages import (
    Error,
    Fini,
    Init,
    Initialized,
    Load,
    Loaded,
    MetricUpdates,
    Response,
    ToServer,
    ToWorker,
)
from tritium.workers.batch_results import SLICED_READ_BYTES, BatchInFlight
from tritium.workers.batch_writer import BatchWriter
from tritium.workers.calls import CallChannel, CallHandler
from tritium.workers.execution_env import WorkerPython
from tritium.workers.launch import ControlProtocol, WorkerDied, launch, reap
from tritium.workers.notices import apply_metric_updates
from tritium.workers.output_pool import OutputPoolStatistics
from tritium.workers.response_streams import ResponseStreams
from tritium.workers.step_tensors import StepTensors, has_steps
from tritium.workers.worker_arenas import WorkerArenas

log = logging.getLogger("tritium.workers")

__all__ = ["SLICED_READ_BYTES", "WorkerDied", "WorkerProcess"]

_FLAGS_ARENA = 4096  # one cancellation byte per decoupled request slot
# Shutdown: a finalize that starts with no time left still gets this long.
_MIN_FINALIZE_S = 0.25


class WorkerProcess:
    """Spawns and drives one ``tritium.backends.python.stub`` process.

    Its jobs, in this order below: messaging, life cycle (load, initialize, stop) and
    sending a batch. Starting and reaping the OS process are in ``launch``, the arenas in
    ``worker_arenas``, writing a batch in ``batch_writer``, settling its reply in
    ``batch_results``.
    """

    def __init__(
        self,
        label: str,
        *,
        env: dict[str, str] | None = None,
        calls: CallHandler | None = None,
        poll_us: int = 0,
        spare_poll_us: int = 0,
        hinted_poll_us: int = 0,
        poll_hint: Callable[[], bool] | None = None,
        python: WorkerPython | None = None,
    ) -> None:
        self.label = label
        # How long the worker polls for its next message before it sleeps (see
        # ``MessageReader``): ``poll_us`` when its last wait was shorter than that (up to
        # ``spare_poll_us`` while its polls find the core to themselves), and
        # ``hinted_poll_us`` after a batch sent while ``poll_hint()`` said so (one client's
        # request is all the server has in flight, or the server's loop polls too).
        self._poll_us = poll_us
        self._spare_poll_us = spare_poll_us
        self._hinted_poll_us = hinted_poll_us
        self._poll_hint = poll_hint if hinted_poll_us else None
        self._env = env
        #: What this worker's environment adds to the server's for its instance's device
        #: (a started worker is given only to an instance that wants the same).
        self.device_env: tuple[tuple[str, str], ...] = ()
        self._python = python  # the model's own interpreter (EXECUTION_ENV_PATH)
        # Requests model code makes of the server (BLS) arrive on a channel of their own.
        self._call_handler = calls
        self._calls: CallChannel | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._transport: asyncio.Transport | None = None
        self._arenas: WorkerArenas | None = None
        self._pending: asyncio.Future[Any] | None = None
        self._writer = BatchWriter()
        # Ensemble steps' large tensors, kept in shared arenas (see ``StepTensors``).
        self._steps = StepTensors(self._send, self.post, self._fd_sock, self._grow_out)
        # The batch in flight (at most one) and the settling of its reply.
        self._flight = BatchInFlight(label, self._steps, self._send)
        self._alive = False
        self.on_exit: Callable[[WorkerProcess], None] | None = None
        #: Messages the worker sends of its own accord, by type (decoupled responses, and
        #: any other kind a feature adds); everything else answers a call or a batch.
        self.handlers: dict[type[Any], Callable[[Any], None]] = {
            MetricUpdates: apply_metric_updates
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
        return self._flight.batch is not None

    @property
    def model_ready(self) -> bool:
        """What the model's optional is_ready() said last (after init and each batch)."""
        return self._flight.model_ready

    @property
    def last_timing(self) -> list[int]:
        """Worker-measured ns of the last batch: building inputs, execute(), outputs."""
        return self._flight.last_timing

    async def spawn(self) -> None:
        loop = asyncio.get_running_loop()
        launched = launch(
            self._env, self._poll_us, self._hinted_poll_us, self._python, self._spare_poll_us
        )
        self._proc = launched.proc
        self._calls = CallChannel(launched.calls, self.label, self._call_handler)
        self._alive = True
        transport, _ = await loop.create_unix_connection(
            lambda: ControlProtocol(self.label, self._on_message, self._on_lost),
            sock=launched.control,
        )
        self._transport = transport  # type: ignore[assignment]
        self._arenas = WorkerArenas(launched.descriptors, self._send)

    # -- messaging --------------------------------------------------------------------

    def _on_message(self, message: ToServer) -> None:
        handler = self.handlers.get(type(message))
        if handler is not None:
            handler(message)
            return
        if self._flight.batch is not None:
            self._flight.on_message(message, self._arenas)
            return
        fut = self._pending
        self._pending = None
        if fut is not None and not fut.done():
            fut.set_result(message)
        else:
            log.warning("%s: unexpected message from worker: %.200r", self.label, message)

    def _on_lost(self) -> None:
        """The control socket closed: the worker is gone. Who hears of it, in order:
        the call waiting for a reply, the instance (its ``on_exit`` parks the scheduler
        until a restart, so it must come before the batch's callbacks, which run at once
        and may try to submit again), the batch in flight, the open decoupled requests."""
        if not self._alive:
            return
        self._alive = False
        died = WorkerDied(f"instance '{self.label}' exited unexpectedly")
        fut, self._pending = self._pending, None
        batch = self._flight.take()
        if fut is not None and not fut.done():
            fut.set_exception(died)
        if self.on_exit is not None:
            self.on_exit(self)
        if batch is not None and not batch[1].done():
            batch[1].set_exception(died)
        if self.streams is not None:
            self.streams.fail_all(died)

    async def call(self, message: ToWorker, timeout: float | None = None) -> ToServer:
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
        if type(reply) is Error:
            raise error_from_code(reply.code, reply.message)
        return reply  # type: ignore[no-any-return]

    def post(self, message: ToWorker) -> None:
        """Send a message that gets no reply; the worker applies it between batches."""
        if self._alive and self._transport is not None:
            self._send(message)

    def _send(self, message: ToWorker) -> None:
        assert self._transport is not None
        self._transport.write(encode(message))

    def _fd_sock(self) -> Any:
        return None if self._arenas is None else self._arenas.fd_sock

    def _grow_out(self, needed: int) -> None:
        if self._arenas is not None:
            self._arenas.grow_out(needed)

    def output_statistics(self) -> OutputPoolStatistics | None:
        """The shared output arenas' counters (None before the first large step batch)."""
        return self._steps.statistics()

    @property
    def referenced_inputs(self) -> tuple[int, int]:
        """Inputs this worker read in place from a shared arena, and their bytes."""
        return self._steps.referenced

    # -- life cycle -------------------------------------------------------------------

    async def load(self, spec: dict[str, Any], timeout: float) -> dict[str, Any]:
        """Import model.py (and auto-complete its config): ``spec`` holds ``Load``'s
        fields. Returns ``{"config": the config after auto-complete, or None}``."""
        reply = await self.call(Load(**spec), timeout)
        return {"config": reply.config if isinstance(reply, Loaded) else None}

    async def initialize(self, init: Init, timeout: float) -> None:
        policy = init.config.get("model_transaction_policy", {})
        if policy.get("decoupled") and self.streams is None:
            arenas = self._arenas
            assert arenas is not None and arenas.fd_sock is not None
            flags = arenas.new("flags", _FLAGS_ARENA)
            self.streams = ResponseStreams(self.label, flags, arenas.fd_sock)
            self.handlers[Response] = self.streams.on_response
        reply = await self.call(init, timeout)
        self._flight.model_ready = reply.ready if isinstance(reply, Initialized) else True

    async def stop(self, timeout: float) -> None:
        """Run finalize, then make sure the process is gone: all of it within ``timeout``
        seconds, plus at most ~0.6 s to finalize an idle model when no time is left and to
        stop a process that ignores its deadline (TERM, then KILL)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        if self._alive:
            with contextlib.suppress(TritiumError, asyncio.TimeoutError, OSError):
                await self.call(Fini(), max(timeout, _MIN_FINALIZE_S))
        await self._reap(deadline - loop.time())

    async def _reap(self, timeout: float) -> None:
        proc = self._proc
        self._alive = False
        if self.streams is not None:
            # Decoupled requests the model never ended end now, not never.
            self.streams.fail_all(Unavailable(f"instance '{self.label}' was stopped"))
        batch = self._flight.take()
        if batch is not None and not batch[1].done():
            batch[1].set_exception(Unavailable(f"instance '{self.label}' is stopping"))
        if self._transport is not None:
            self._transport.close()
            self._transport = None
        if proc is not None:
            await reap(proc, timeout)
        self._close_arenas()
        collect_released()

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
        self._steps.close()
        if self._arenas is not None:
            self._arenas.close()
            self._arenas = None

    # -- sending a batch --------------------------------------------------------------

    def submit(self, batch: list[InferRequest]) -> Completion[list[InferResponse]]:
        """Start one batch now (synchronously: inputs written, message sent) and return
        its completion, which gets one response per request and runs its callbacks the
        moment the reply arrives. Model errors arrive as per-response errors; the batch
        fails only when the worker is gone or the reply is malformed."""
        arenas = self._arenas
        if not self._alive or self._transport is None or arenas is None:
            raise WorkerDied(f"instance '{self.label}' is not running")
        if self._flight.batch is not None or self._pending is not None:
            raise InternalError(f"instance '{self.label}' is busy")
        poll = self._poll_hint is not None and self._poll_hint()
        writer = self._writer
        sliced = writer.sliced
        if sliced.items:  # left by a batch whose writing failed
            sliced.clear()
        streams = self.streams
        if streams is not None:
            frame = writer.write_decoupled(batch, streams.open(batch), poll, arenas)
        else:
            stepped = None
            if batch[0].ensemble_step or (len(batch) > 1 and has_steps(batch)):
                stepped = self._steps.write(batch, poll, arenas.for_inputs)
            frame = writer.write(batch, poll, arenas) if stepped is None else stepped
        done: Completion[list[InferResponse]] = Completion()
        self._flight.batch = (batch, done)
        if sliced.items:
            self._write_slices(frame, done)
        else:
            self._transport.write(frame)
        return done

    def _write_slices(self, frame: bytes, done: Completion[list[InferResponse]]) -> None:
        """Write the batch's big inputs a slice per loop iteration, then send ``frame``;
        given up when the batch ends first (the worker stopped or died)."""
        current = self._flight.batch
        sliced = self._writer.sliced
        if current is None or current[1] is not done or done.done():
            # Ended first. Its writes are dropped, unless a newer batch owns them now.
            if current is None:
                sliced.clear()
            return
        arenas = self._arenas
        if arenas is None or arenas.inputs.buf is None or self._transport is None:
            sliced.clear()
            return
        if sliced.step(arenas.inputs.buf):
            sliced.clear()
            self._transport.write(frame)
            return
        asyncio.get_running_loop().call_soon(self._write_slices, frame, done)

    def cancel(self, request: InferRequest) -> None:
        """Raise the cancellation flag the model sees through ``request.is_cancelled()``."""
        if self.streams is not None:
            self.streams.cancel(request)
            return
        arenas = self._arenas
        current = self._flight.batch
        if current is None or arenas is None or arenas.inputs.buf is None:
            return
        for index, queued in enumerate(current[0]):
            if queued is request:
                arenas.inputs.buf[index] = 1
                return
