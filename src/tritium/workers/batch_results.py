"""The reading side of one worker: the batch in flight, settled from the worker's reply.

Exactly one batch is in flight per worker. While it is, every message from the worker
that is not a notice belongs to it: ``Need`` (lend the outputs more room, then
``Continue``), ``Error`` (the batch fails), or its ``Result``, whose outputs are copied out
of the output arena (a slice per loop iteration when they are big) and turned into
responses. Settling one reply is, in this order: the model's readiness and the batch's
timing are recorded, the responses read, and only then the batch's completion is set,
which runs the scheduler's callback at once (it reads the first two, and may submit the
next batch to this worker before ``settle`` returns).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from tritium.core import InferRequest, InferResponse
from tritium.core.completion import Completion
from tritium.core.errors import InternalError, error_from_code
from tritium.ipc import Arena
from tritium.ipc import tensors as ipc_tensors
from tritium.ipc.messages import Continue, Error, Need, Result, ToServer, ToWorker
from tritium.workers.batch_messages import read_responses
from tritium.workers.launch import WorkerDied
from tritium.workers.step_tensors import StepTensors
from tritium.workers.worker_arenas import WorkerArenas

log = logging.getLogger("tritium.workers")

# Answers of this many bytes or more are copied out of the output arena a slice per loop
# iteration, as big inputs are written (a 64 MiB copy held the loop ~40 ms).
SLICED_READ_BYTES = ipc_tensors.SLICED_WRITE_BYTES
NO_TIMING = [0, 0, 0]

Batch = tuple[list[InferRequest], Completion[list[InferResponse]]]


class BatchInFlight:
    """The batch one worker is running, and how its reply is settled."""

    def __init__(
        self,
        label: str,
        steps: StepTensors,
        send: Callable[[ToWorker], None],
    ) -> None:
        self.label = label
        self._steps = steps
        self._send = send
        #: The batch and the completion its responses go to (None: no batch in flight).
        self.batch: Batch | None = None
        #: What the model's optional is_ready() said last (after init and each batch).
        self.model_ready = True
        #: Worker-measured ns of the last batch: building inputs, execute(), outputs.
        self.last_timing: list[int] = NO_TIMING

    def take(self) -> Batch | None:
        """The batch in flight, no longer in flight (it is to be failed)."""
        batch, self.batch = self.batch, None
        return batch

    def on_message(self, message: ToServer, arenas: WorkerArenas | None) -> None:
        """A message from the worker while a batch is in flight (``arenas``: the
        worker's, None once they are closed)."""
        if type(message) is Need:
            self._lend(message, arenas)
            return
        assert self.batch is not None
        batch, fut = self.batch
        self.batch = None
        if fut.done() or type(message) is not Result:
            self._fail(fut, message)
            return
        steps = self._steps
        kept = steps.kept(message) if steps.in_flight else None
        end = message.end
        out = arenas.outputs if arenas is not None else None
        if (
            kept is None
            and SLICED_READ_BYTES <= end
            and out is not None
            and out.buf is not None
            and end <= out.size
        ):
            # A big answer: copied out of the output arena a slice per loop iteration, so
            # other clients are not held up; the instance stays busy until it is done.
            self.batch = (batch, fut)
            copy = ipc_tensors.SlicedWrites()
            copy.add(0, None, memoryview(out.buf)[:end])
            self._read_slices(message, bytearray(end), copy, out)
            return
        self.settle(batch, fut, message, kept, out)

    def _lend(self, message: Need, arenas: WorkerArenas | None) -> None:
        """The outputs did not fit: a bigger arena for them, then ``Continue``."""
        if message.keep:
            self._send(self._steps.need(message.size))
            return
        if arenas is not None:
            arenas.grow_out(message.size)
        self._send(Continue())

    def _fail(self, fut: Completion[list[InferResponse]], message: ToServer) -> None:
        """The batch ended without responses to read (a shared arena lent for them goes
        back to its pool)."""
        if self._steps.in_flight:
            self._steps.failed()
        if fut.done():
            return
        if type(message) is Error:
            fut.set_exception(error_from_code(message.code, message.message))
        else:
            kind = type(message).__name__
            fut.set_exception(InternalError(f"instance '{self.label}' sent '{kind}' for a batch"))

    def _read_slices(
        self,
        message: Result,
        block: bytearray,
        copy: ipc_tensors.SlicedWrites,
        out: Arena,
    ) -> None:
        current = self.batch
        if current is None or current[1].done():
            return  # the worker died or stopped meanwhile: the batch has failed
        if out.buf is None:  # closed meanwhile
            self.batch = None
            current[1].set_exception(WorkerDied(f"instance '{self.label}' is not running"))
            return
        if not copy.step(block):
            asyncio.get_running_loop().call_soon(self._read_slices, message, block, copy, out)
            return
        self.batch = None
        self.settle(current[0], current[1], message, block, out)

    def settle(
        self,
        batch: list[InferRequest],
        fut: Completion[list[InferResponse]],
        message: Result,
        block: Any,
        out: Arena | None,
    ) -> None:
        """Complete ``fut`` with the reply's responses (views of ``block`` when given,
        else of a copy of the output arena ``out``), in the order the module states."""
        if message.ready is not None:
            self.model_ready = message.ready
        self.last_timing = message.t or NO_TIMING
        try:
            responses = self._read_responses(batch, message, block, out)
        except Exception as exc:  # noqa: BLE001 - a malformed reply fails the batch, not us
            log.exception("%s: malformed reply from worker", self.label)
            fut.set_exception(
                InternalError(f"instance '{self.label}' returned a malformed reply: {exc}")
            )
            return
        fut.set_result(responses)

    def _read_responses(
        self, batch: list[InferRequest], reply: Result, block: Any, out: Arena | None
    ) -> list[InferResponse]:
        if block is not None:
            return read_responses(batch, reply, None, self.label, block)
        return read_responses(batch, reply, out.buf if out is not None else None, self.label)
