"""One request to a decoupled model, as the frontends see it: zero or more responses,
then a final mark, delivered as the model sends them.

The frontend gives a callback ``emit(call, response | None, final)``; the call stamps
every response with the model, version and request id the client expects, counts the
request once it is final, turns a failure before ``execute`` (full queue, instance gone,
unloading) into a final error response, and after :meth:`DecoupledCall.cancel` (the
client went away) delivers nothing more while the model sees ``is_cancelled()``. With
``histogram_latencies`` on, the first response the model sends is observed in the model's
first-response histogram. A sampled call (``traced``) is recorded in the trace once both
have happened: ``execute`` took (or finished) its batch, and the final response went out.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from tritium.core import Completion, InferRequest, InferResponse
from tritium.core.clock import now_ns
from tritium.core.errors import InternalError, TritiumError
from tritium.service.tracing.recorder import Window, compute_window

if TYPE_CHECKING:
    from tritium.service.model.interface import ServedVersion
    from tritium.service.tracing.recorder import Recorder

#: ``emit(call, response, final)``: a response (None for a final mark without one).
Emit = Callable[["DecoupledCall", "InferResponse | None", bool], None]


class DecoupledCall:
    __slots__ = (
        "request",
        "_loaded",
        "_emit",
        "_scheduled",
        "done",
        "cancelled",
        "_responded",
        "_recorder",
        "_taken",
        "_window",
    )

    def __init__(self, loaded: ServedVersion, request: InferRequest, emit: Emit) -> None:
        self.request = request
        self._loaded = loaded
        self._emit = emit
        self._scheduled: Completion | None = None
        #: True once the final response went out (or the call was cancelled).
        self.done = False
        self.cancelled = False
        self._responded = False
        self._recorder: Recorder | None = None
        self._taken = False  # execute took the batch (or it never will)
        self._window: Window = None  # measured when it was taken

    def traced(self, recorder: Recorder) -> None:
        """Record this call in the trace when it ends (call before ``start``)."""
        self._recorder = recorder

    @property
    def model_name(self) -> str:
        return self._loaded.name

    @property
    def model_version(self) -> str:
        return self._loaded.version_str

    def start(self, scheduled: Completion) -> None:
        """Follow the scheduler's completion (settled when ``execute`` has the batch)."""
        self._scheduled = scheduled
        scheduled.add_done_callback(self._on_taken)

    def _on_taken(self, scheduled: Completion) -> None:
        if self._recorder is not None:
            self._taken = True
            if not scheduled.cancelled() and scheduled.exception() is None:
                # Its batch stamped the compute times on the request as it finished.
                self._window = compute_window(self.request)
            self._record_if_ended()
        if self.done or scheduled.cancelled():
            return
        exc = scheduled.exception()
        if exc is None:
            return  # responses come through on_response
        if not isinstance(exc, TritiumError):
            exc = InternalError(str(exc))
        response = InferResponse(self._loaded.name, self._loaded.version_str, self.request.id)
        response.error = exc
        self._finish(response)

    def on_response(self, response: InferResponse | None, final: bool) -> None:
        """From the instance: one response as the model sent it."""
        if self.done:
            return
        if response is not None:
            loaded = self._loaded
            if not self._responded:
                self._responded = True
                histogram = loaded.first_response
                if histogram is not None:
                    histogram.observe((now_ns() - self.request.arrival_ns) // 1_000_000)
            response.model_name = loaded.name
            response.model_version = loaded.version_str
            response.id = self.request.id
            if response.error is None:
                # Each streamed response is shaped as a single one would be.
                if loaded.reshaper is not None:
                    loaded.reshaper.apply(response)
                if self.request.classification:
                    loaded.classifier.apply(response, self.request.classification)
        if final:
            self._finish(response)
        else:
            self._emit(self, response, False)

    def _finish(self, response: InferResponse | None) -> None:
        self.done = True
        request = self.request
        request.responses = None  # no cycle left for the collector
        start = request.arrival_ns
        ok = response is None or response.error is None
        dispatched = request.dispatch_ns or start
        self._loaded.stats.record_request(ok, now_ns() - start, dispatched - start)
        self._emit(self, response, True)
        self._record_if_ended()

    def _record_if_ended(self) -> None:
        """Record the trace (once) when the batch was taken and the call is done."""
        recorder = self._recorder
        if recorder is not None and self._taken and self.done:
            self._recorder = None
            recorder.record(self._loaded, self.request, now_ns(), self._window)

    def cancel(self) -> None:
        """The client went away: drop the request if queued, else flag it cancelled
        for the model; nothing more is emitted."""
        if self.done:
            return
        self.done = self.cancelled = True
        self.request.responses = None  # what the model still sends goes nowhere
        self._record_if_ended()
        scheduled = self._scheduled
        if scheduled is not None and not scheduled.done():
            scheduled.cancel()
            return
        for instance in self._loaded.instances:
            instance.cancel(self.request)
