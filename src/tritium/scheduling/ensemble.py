"""The ensemble scheduler: runs an :class:`EnsemblePlan` for each request.

Callback-driven, with no task per request. A step starts the moment the last tensor it
reads exists, so independent branches run side by side; each step is one request to its
model, submitted through ``submit_step`` (the submitter's), so that model's own
scheduler (dynamic batching, instance groups) and statistics apply. Step outputs are the
arrays the worker replies gave the server: they become the next step's inputs as they are,
with no trip back through a frontend. Each step is a :class:`StepRequest`: a large output
stays in the shared arena its worker wrote it to, and the next step's worker reads it
there in place when that step is its only reader (see ``tritium.ipc.shared_arenas``).

The first failing step fails the request with that step's message; cancelling the
request cancels every step in flight and starts no other.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any, Protocol

from tritium.core import Completion, InferRequest, InferResponse, InputTensor, RequestedOutput
from tritium.core.clock import now_ns
from tritium.core.errors import Cancelled, InternalError, TritiumError
from tritium.core.types import OutputTensor
from tritium.scheduling.ensemble_plan import EnsemblePlan

SubmitStep = Callable[[InferRequest], Completion]  # Completion[InferResponse]
# A finished step request's (compute input, infer, output) ns: those of the batch that ran
# it, as its instance measured them; None when unknown (e.g. a nested ensemble's step).


class StepRequest(InferRequest):
    """A request for one step of an ensemble."""

    __slots__ = ("movable_inputs",)
    ensemble_step = True
    # An instance slot here; every other request reads the base class's () default.
    movable_inputs: tuple[bool, ...]  # type: ignore[misc]


def _movable(plan: EnsemblePlan) -> list[frozenset[str]]:
    """Per step, the model inputs whose tensor no one else reads: made by a step (not a
    client input), read by this one step input alone, and no ensemble output. The step's
    worker may read (and, as model code may, write) those in place."""
    uses: dict[str, int] = {}
    for step in plan.steps:
        for _, tensor in step.inputs:
            uses[tensor] = uses.get(tensor, 0) + 1
    made = {tensor for step in plan.steps for _, tensor in step.outputs}
    private = {t for t, n in uses.items() if n == 1 and t in made and t not in plan.outputs}
    return [
        frozenset(model_input for model_input, tensor in step.inputs if tensor in private)
        for step in plan.steps
    ]


class ExecutionRecorder(Protocol):
    """Where the ensemble counts its executions (the model's statistics)."""

    def record_execution(
        self, rows: int, requests: int, input_ns: int, infer_ns: int, output_ns: int
    ) -> None: ...


@dataclass(frozen=True, slots=True)
class EnsembleStatistics:
    in_flight: int
    requests: int
    steps_run: int
    # Nothing waits in an ensemble's own queue: each step queues at its model.
    queued: int = 0


class _Run:
    """One ensemble request in progress."""

    __slots__ = (
        "request",
        "waiter",
        "tensors",
        "waits",
        "in_flight",
        "left",
        "input_ns",
        "infer_ns",
        "output_ns",
    )

    def __init__(self, request: InferRequest, waiter: Completion, plan: EnsemblePlan) -> None:
        self.request = request
        self.waiter = waiter
        # ensemble tensor -> (datatype, shape, data)
        self.tensors: dict[str, tuple[str, tuple[int, ...], Any]] = {
            t.name: (t.datatype, t.shape, t.data) for t in request.inputs
        }
        self.waits = list(plan.waits)
        self.in_flight: dict[int, Completion] = {}
        self.left = len(plan.steps)
        # The steps' compute times, summed (Triton's ensemble statistics report these).
        self.input_ns = 0
        self.infer_ns = 0
        self.output_ns = 0


class EnsembleScheduler:
    def __init__(
        self,
        plan: EnsemblePlan,
        submit_step: SubmitStep,
        recorder: ExecutionRecorder | None = None,
    ) -> None:
        self.plan = plan
        self._submit_step = submit_step
        self._recorder = recorder
        self._movable = _movable(plan)
        self._runs: set[_Run] = set()
        self._requests = 0
        self._steps_run = 0

    def statistics(self) -> EnsembleStatistics:
        return EnsembleStatistics(len(self._runs), self._requests, self._steps_run)

    def submit(self, request: InferRequest) -> Completion:
        """Start ``request``'s first steps now; the completion gets the ensemble's response."""
        waiter: Completion = Completion()
        run = _Run(request, waiter, self.plan)
        self._runs.add(run)
        self._requests += 1
        waiter.add_done_callback(partial(self._finished, run))
        # The ensemble has no queue of its own: as in Triton, its steps' queue times count
        # for their models, not for the ensemble.
        request.dispatch_ns = now_ns()
        for index in self.plan.first_steps:
            if waiter.done():
                break
            self._start(run, index)
        return waiter

    def _start(self, run: _Run, index: int) -> None:
        step = self.plan.steps[index]
        request = run.request
        tensors = run.tensors
        inputs = []
        movable = self._movable[index]
        for model_input, tensor in step.inputs:
            got = tensors.get(tensor)
            if got is None:  # an optional ensemble input the client left out
                continue
            datatype, shape, data = got
            inputs.append(InputTensor(model_input, datatype, shape, data))
            if model_input in movable:
                # Read by this step alone: the run needs it no more.
                del tensors[tensor]
        # Requests of one layout (the ensemble request's, and the same step input types
        # and shapes) share their step's validation and exec message, as client requests
        # of one layout do.
        layout = request.layout_key
        if layout is not None:
            layout = (self, index, layout, tuple((t.datatype, tuple(t.shape)) for t in inputs))
        step_request = StepRequest(
            model_name=step.model_name,
            model_version=step.model_version,
            id=request.id,
            inputs=inputs,
            outputs=[RequestedOutput(name) for name, _ in step.outputs],
            parameters=dict(request.parameters),
            correlation_id=request.correlation_id,
            flags=request.flags,
            priority=request.priority,
            timeout_us=request.timeout_us,
            layout_key=layout,
        )
        step_request.movable_inputs = tuple(t.name in movable for t in inputs)
        try:
            done = self._submit_step(step_request)
        except TritiumError as exc:
            _fail(run.waiter, exc)
            return
        self._steps_run += 1
        run.in_flight[index] = done
        done.add_done_callback(partial(self._step_done, run, index, step_request))

    def _step_done(
        self, run: _Run, index: int, step_request: InferRequest, done: Completion
    ) -> None:
        run.in_flight.pop(index, None)
        waiter = run.waiter
        if waiter.done():
            return
        if done.cancelled():
            _fail(waiter, Cancelled("request was cancelled"))
            return
        exc = done.exception()
        if exc is not None:
            _fail(waiter, exc if isinstance(exc, TritiumError) else InternalError(str(exc)))
            return
        response: InferResponse = done.result()
        if response.error is not None:
            _fail(waiter, response.error)
            return
        # The compute times of the batch that ran the step, stamped on it by its instance.
        timing = step_request.compute_ns
        if timing is not None:
            run.input_ns += timing[0]
            run.infer_ns += timing[1]
            run.output_ns += timing[2]
        step = self.plan.steps[index]
        by_name = {o.name: o for o in response.outputs}
        consumers = self.plan.consumers
        ready: list[int] = []
        for model_output, tensor in step.outputs:
            out = by_name.get(model_output)
            if out is None:
                _fail(
                    waiter,
                    InternalError(
                        f"in ensemble '{self.plan.name}', {step.describe()} returned no "
                        f"output '{model_output}'"
                    ),
                )
                return
            run.tensors[tensor] = (out.datatype, out.shape, out.data)
            for consumer in consumers.get(tensor, ()):
                run.waits[consumer] -= 1
                if run.waits[consumer] == 0:
                    ready.append(consumer)
        run.left -= 1
        for consumer in ready:
            if waiter.done():
                return
            self._start(run, consumer)
        if run.left == 0 and not waiter.done():
            waiter.set_result(self._response(run))

    def _response(self, run: _Run) -> InferResponse:
        request = run.request
        names = self.plan.outputs
        if request.outputs is not None:
            # In the model's order, whatever order they were asked in.
            wanted = {o.name for o in request.outputs}
            names = tuple(n for n in names if n in wanted)
        outputs = []
        for name in names:
            datatype, shape, data = run.tensors[name]
            outputs.append(OutputTensor(name, datatype, shape, data))
        if self._recorder is not None:
            # As Triton 2.51 counts an ensemble: one execution per request, in the batch
            # statistics of the request's own batch size, and as compute input, infer and
            # output the sums of its steps' (each step's those of the batch it ran in).
            self._recorder.record_execution(
                request.batch_size, 1, run.input_ns, run.infer_ns, run.output_ns
            )
        response = InferResponse(request.model_name, request.model_version, request.id, outputs)
        # Triton's ensemble responses carry the sequence parameters of their steps.
        response.parameters = {
            "sequence_id": request.correlation_id,
            "sequence_start": bool(request.flags & 1),
            "sequence_end": bool(request.flags & 2),
        }
        return response

    def _finished(self, run: _Run, waiter: Completion) -> None:
        self._runs.discard(run)
        if run.in_flight:
            # Failed or cancelled: the steps still running are of no use any more.
            in_flight, run.in_flight = run.in_flight, {}
            for done in in_flight.values():
                done.cancel()

    def fail_all(self, error: TritiumError) -> None:
        """Fail every request in progress (the ensemble is unloading)."""
        for run in list(self._runs):
            _fail(run.waiter, error)

    def close(self) -> None:
        """Nothing of its own to release."""


def _fail(waiter: Completion, error: BaseException) -> None:
    if not waiter.done():
        waiter.set_exception(error)
