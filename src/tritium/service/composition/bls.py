"""Requests from model code (BLS) served in the main process.

A worker's call arrives as a :class:`~tritium.workers.calls.WorkerCall`; an ``infer`` call
becomes an ordinary :class:`InferRequest` submitted through the submitter, so the target's
scheduler (batching with other callers' requests, instances, statistics) applies and an
ensemble can be the target. Its response is written back through the call channel. Nothing
here blocks the event loop, and no call needs a free instance of its caller.

Deadlocks: an instance waiting on a BLS call holds its instance. A call that could only be
served by instances that are all (directly or through other calls) waiting on its own
caller would wait forever; it is answered at once with an error instead. The check runs
only on the BLS path, over the calls in flight.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any, Protocol

from tritium.core import Completion, InferRequest, InputTensor, RequestedOutput
from tritium.core.errors import DecoupledRefused, InternalError, TritiumError, Unavailable
from tritium.ipc.messages import (
    CallReply,
    InferCall,
    LoadModelCall,
    ModelReadyCall,
    UnloadModelCall,
)
from tritium.service.composition.bls_streams import (
    CANCELLED_MESSAGE,
    TIMEOUT_MESSAGE,
    StreamedBlsCall,
)
from tritium.service.model.table import ModelTable
from tritium.service.requests.submitter import Submitter
from tritium.workers.calls import WorkerCall

log = logging.getLogger("tritium.bls")


class ModelControl(Protocol):
    """Loading and unloading by name (explicit model control), for model code."""

    def load(self, name: str, config: str) -> Awaitable[None]: ...

    def unload(self, name: str, unload_dependents: bool) -> Awaitable[None]: ...


class _InFlight:
    __slots__ = ("call", "caller", "target", "done")

    def __init__(self, call: WorkerCall, caller: str, target: list[str]) -> None:
        self.call = call
        self.caller = caller  # "model:version" of the calling worker
        self.target = target  # the "model:version"s whose instances must serve it
        self.done: Completion | None = None


class BlsEndpoint:
    """The call handler every worker gets: ``infer``, ``ready``, ``load``, ``unload``.

    Requests go through ``submitter.submit_step`` (not counted as clients' requests),
    models are looked up in ``table``, loads and unloads go to ``control``."""

    def __init__(
        self, submitter: Submitter, table: ModelTable, control: ModelControl | None = None
    ) -> None:
        self.submitter = submitter
        self.table = table
        self.control = control
        self._in_flight: set[_InFlight] = set()
        self._ops: dict[type[Any], Callable[[WorkerCall], None]] = {
            InferCall: self._infer,
            ModelReadyCall: self._ready,
            LoadModelCall: self._load,
            UnloadModelCall: self._unload,
        }

    def __call__(self, call: WorkerCall) -> None:
        op = self._ops.get(type(call.message))
        if op is None:
            kind = type(call.message).__name__
            call.reply(CallReply(error=("INVALID_ARG", f"unknown call '{kind}'")))
            return
        op(call)

    # -- inference ---------------------------------------------------------------------

    def _infer(self, call: WorkerCall) -> None:
        m = call.message
        assert isinstance(m, InferCall)
        params = m.params or {}
        if isinstance(params, str):
            params = json.loads(params)
        request = InferRequest(
            model_name=m.model,
            model_version=m.version,
            id=m.rid,
            inputs=[
                InputTensor(name, datatype, tuple(array.shape), array)
                for name, datatype, array in call.tensors
            ],
            outputs=[RequestedOutput(n) for n in m.outputs] or None,
            parameters=params,
            correlation_id=m.corr,
            flags=m.flags,
            timeout_us=m.timeout,
        )
        try:
            target = self._target_labels(request)
        except TritiumError as exc:
            _reply_error(call, exc)
            return
        entry = _InFlight(call, call.label, target)
        self._in_flight.add(entry)
        if self._deadlocked(entry):
            self._in_flight.discard(entry)
            _reply_error(
                call,
                Unavailable(
                    f"BLS request from model '{_model(call.label)}' to model "
                    f"'{request.model_name}' would never complete: every instance that could "
                    "serve it is waiting on a BLS request that waits on this one (deadlock); "
                    "give the models more instances or break the cycle of calls"
                ),
            )
            return
        if m.decoupled and self.submitter.is_decoupled(request.model_name, request.model_version):
            StreamedBlsCall(self.submitter.submit_step, call, partial(self.finished, entry)).start(
                request
            )
            return
        try:
            done = self.submitter.submit_step(request)
        except DecoupledRefused:
            self._in_flight.discard(entry)
            _reply_error(call, InternalError(_decoupled_refused(request.model_name)))
            return
        except TritiumError as exc:
            self._in_flight.discard(entry)
            _reply_error(call, exc)
            return
        if m.decoupled:
            # exec(decoupled=True) on a model that is not: its one response is the last.
            call.open_stream(done.cancel)
        entry.done = done
        timer = None
        if request.timeout_us > 0:
            timer = asyncio.get_running_loop().call_later(
                request.timeout_us / 1e6, partial(self._expire, entry)
            )
        call.on_abandon = done.cancel
        done.add_done_callback(partial(self._answered, entry, timer))

    def _expire(self, entry: _InFlight) -> None:
        if entry.done is not None and not entry.done.done():
            # Answer first: cancelling settles the completion, whose callback replies too.
            entry.call.on_abandon = None
            self._in_flight.discard(entry)
            _reply_error(entry.call, Unavailable(TIMEOUT_MESSAGE))
            entry.call = None  # type: ignore[assignment]
            entry.done.cancel()

    def _answered(
        self, entry: _InFlight, timer: asyncio.TimerHandle | None, done: Completion
    ) -> None:
        self._in_flight.discard(entry)
        if timer is not None:
            timer.cancel()
        call = entry.call
        if call is None:  # timed out and answered already
            return
        if done.cancelled():
            _reply_error(call, Unavailable(CANCELLED_MESSAGE))
            return
        exc = done.exception()
        if exc is not None:
            _reply_error(call, exc)
            return
        response = done.result()
        if response.error is not None:
            _reply_error(call, response.error)
            return
        message = CallReply(params=response.parameters or None)
        call.reply(message, [(o.name, o.datatype, o.data) for o in response.outputs])

    def finished(self, entry: _InFlight) -> None:
        """A call answered by other means (a streamed call) is no longer waited on."""
        self._in_flight.discard(entry)

    # -- deadlock check ----------------------------------------------------------------

    def _target_labels(self, request: InferRequest) -> list[str]:
        """The model versions whose instances serve ``request`` (an ensemble's steps)."""
        models = self.table
        loaded = models.get(request.model_name, request.model_version)
        plan = getattr(loaded, "plan", None)
        if plan is None:
            return [f"{loaded.name}:{loaded.version_str}"]
        labels = []
        for step in plan.steps:
            try:
                step_loaded = models.get(step.model_name, step.model_version)
            except TritiumError:
                continue
            labels.append(f"{step_loaded.name}:{step_loaded.version_str}")
        return labels

    def _instance_count(self, label: str) -> int:
        name, _, version = label.rpartition(":")
        try:
            return len(self.table.get(name, version).instances)
        except TritiumError:
            return 0

    def _deadlocked(self, new: _InFlight) -> bool:
        waiting: dict[str, dict[int, list[list[str]]]] = {}
        for entry in self._in_flight:
            workers = waiting.setdefault(entry.caller, {})
            workers.setdefault(id(entry.call.channel), []).append(entry.target)
        stuck = stuck_models(waiting, self._instance_count)
        return any(t in stuck for t in new.target)

    # -- model management --------------------------------------------------------------

    def _ready(self, call: WorkerCall) -> None:
        m = call.message
        assert isinstance(m, ModelReadyCall)
        try:
            ready = self.table.get(m.model, m.version).ready
        except TritiumError:
            ready = False
        call.reply(CallReply(value=ready))

    def _load(self, call: WorkerCall) -> None:
        m = call.message
        assert isinstance(m, LoadModelCall)
        self._control(call, "load", m.model, m.config)

    def _unload(self, call: WorkerCall) -> None:
        m = call.message
        assert isinstance(m, UnloadModelCall)
        self._control(call, "unload", m.model, m.unload_dependents)

    def _control(self, call: WorkerCall, what: str, name: str, arg: Any) -> None:
        if self.control is None:
            _reply_error(
                call,
                Unavailable(
                    f"cannot {what} model '{name}' from model code: this server was not "
                    "started with model control"
                ),
            )
            return
        action = self.control.load(name, arg) if what == "load" else self.control.unload(name, arg)

        async def run() -> None:
            try:
                await action
            except TritiumError as exc:
                _reply_error(call, exc)
            except Exception as exc:  # noqa: BLE001 - the caller hears of it
                log.exception("%s of model '%s' from model code failed", what, name)
                _reply_error(call, Unavailable(f"failed to {what} '{name}': {exc}"))
            else:
                call.reply(CallReply(value=True))

        asyncio.ensure_future(run())


def stuck_models(
    waiting: dict[str, dict[int, list[list[str]]]], instance_count: Callable[[str], int]
) -> set[str]:
    """The model versions that can never make progress again.

    ``waiting[label][worker]`` lists, for each BLS call the worker of model version
    ``label`` waits on, the model versions that must serve it (an ensemble's step models,
    all of them). A worker is stuck while one of its calls needs a stuck model version; a
    model version is stuck when
    all of its instances are stuck workers. This is the greatest such set: start from every
    model version whose instances all wait, drop those with a worker that can go on, repeat.
    """
    stuck = {
        label for label, workers in waiting.items() if len(workers) >= instance_count(label) > 0
    }
    changed = True
    while changed:
        changed = False
        for label in list(stuck):
            for targets in waiting[label].values():
                if not any(any(x in stuck for x in t) for t in targets):
                    stuck.discard(label)
                    changed = True
                    break
    return stuck


def _decoupled_refused(model: str) -> str:
    # Triton's text for exec() without decoupled=True on a decoupled model.
    return (
        f"Model {model} - Error when running inference: Model {model} is using the "
        "decoupled. The current BLS request call doesn't support models using the decoupled "
        "transaction policy. Please use 'decoupled=True' argument to the 'exec' or "
        "'async_exec' calls for decoupled models.'"
    )


def _model(label: str) -> str:
    return label.rpartition(":")[0]


def _reply_error(call: WorkerCall, error: BaseException) -> None:
    if isinstance(error, TritiumError):
        call.reply(CallReply(error=(error.code.name, error.message)))
    else:
        call.reply(CallReply(error=("INTERNAL", str(error))))
