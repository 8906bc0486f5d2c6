"""The request path: a request from a frontend (or an ensemble step, or model code) is
looked up in the model table, validated, handed to its model's scheduler, and settled.

Everything a response needs after the model answered happens in ONE done-callback per
request, :func:`settle`, whose order is stated there; a request that needs none of the
optional steps (shared memory, classification, reshape, tracing, the spinner) is settled by
:func:`settle_plain` (the statistics alone) and pays nothing for the others.
"""

from __future__ import annotations

from collections.abc import Hashable
from functools import partial
from typing import Any, Protocol

from tritium.core import Completion, InferRequest, InferResponse
from tritium.core.clock import now_ns
from tritium.core.errors import DecoupledRefused, TritiumError, Unavailable, Unsupported
from tritium.core.statistics import BACKEND, CANCELED
from tritium.service.model.interface import ServedVersion
from tritium.service.model.table import ModelTable
from tritium.service.requests.failures import failure_reason
from tritium.service.requests.spin import RequestSpinner
from tritium.service.requests.streams import DecoupledCall, Emit
from tritium.service.shared_memory.registry import SharedMemoryRegistry
from tritium.service.shared_memory.tensors import RequestRegions, attach_request, write_outputs
from tritium.service.tracing.recorder import Recorder
from tritium.service.tracing.settings import TraceSettings

DECOUPLED_UNARY = "this endpoint doesn't support models with decoupled transaction policy"
SHM_DISABLED = (
    "client shared memory is disabled on this server (--allow-client-shm=false): send "
    "tensor data in the request instead"
)


class SubmitStep(Protocol):
    """:meth:`Submitter.submit_step`, as ensembles and BLS calls are given it."""

    def __call__(
        self, request: InferRequest, stream: Emit | None = None
    ) -> Completion[InferResponse]: ...


class Submitter:
    """Submits requests to the versions of ``table``.

    ``spinner`` counts client requests in flight (disabled: nothing is counted, at no cost
    per request); ``trace_settings`` and ``recorder`` pick and record traced requests;
    ``shared_memory`` resolves inputs and outputs in client regions (refused unless
    ``allow_client_shm``)."""

    __slots__ = (
        "table",
        "trace_settings",
        "recorder",
        "shared_memory",
        "allow_client_shm",
        "stopping",
        "_counted",
    )

    def __init__(
        self,
        table: ModelTable,
        spinner: RequestSpinner,
        trace_settings: TraceSettings,
        recorder: Recorder,
        shared_memory: SharedMemoryRegistry,
        allow_client_shm: bool = True,
    ) -> None:
        self.table = table
        self.trace_settings = trace_settings
        self.recorder = recorder
        self.shared_memory = shared_memory
        self.allow_client_shm = allow_client_shm
        #: Set at shutdown: new requests are refused.
        self.stopping = False
        self._counted: RequestSpinner | None = spinner if spinner.enabled else None

    def submit(
        self, request: InferRequest, stream: Emit | None = None
    ) -> Completion[InferResponse]:
        """Validate and schedule a client's ``request`` now; the completion gets the response.

        Raises at once for requests that cannot be accepted (unknown model, invalid
        input, full queue). This is the frontends' fast path: no task, no coroutine.
        A decoupled model needs ``stream`` (else UNSUPPORTED): the request then returns
        a :class:`DecoupledCall` that emits each response as the model sends it.
        """
        return self._submit(request, stream, self._counted)

    def submit_step(
        self, request: InferRequest, stream: Emit | None = None
    ) -> Completion[InferResponse]:
        """:meth:`submit` for a request made on behalf of another one (an ensemble's
        step, a BLS call): not counted as a client's request in flight."""
        return self._submit(request, stream, None)

    def replay(self, name: str, version: str, replay: Hashable) -> Any:
        """The answer filed with the response cache for ``replay`` (a frontend's key for a
        whole request, byte for byte: see ``ResponseStore.keep_replay``) by the version
        now serving ``name``/``version``, counted as a cache hit; None when the request
        must take the full path: nothing filed, no such version, tracing on, or the server
        shutting down (the full path then answers as it should)."""
        if self.stopping or self.trace_settings.active:
            return None
        try:
            cache = self.table.get(name, version).cache
        except TritiumError:
            return None
        if cache is None:
            return None
        form = cache.replay(replay)
        if form is not None and self._counted is not None:
            self._counted.linger()
        return form

    def is_decoupled(self, name: str, version: str) -> bool:
        """Whether the model (version) uses the decoupled transaction policy."""
        return self.table.get(name, version).decoupled

    def _submit(
        self, request: InferRequest, stream: Emit | None, spinner: RequestSpinner | None
    ) -> Completion[InferResponse]:
        if self.stopping:
            raise Unavailable("Server is shutting down")
        loaded = self.table.get(request.model_name, request.model_version)
        if loaded.decoupled:
            return self._submit_decoupled(loaded, request, stream)  # type: ignore[return-value]
        used = self._attach_shared_memory(request) if request.shared_memory else None
        try:
            loaded.signature.validate(request)
            request.arrival_ns = now_ns()
            try:
                cache = loaded.cache
                if cache is None:
                    done = loaded.scheduler.submit(request)
                else:
                    done = cache.submit(request, loaded.scheduler.submit)
                    if done.done():
                        # A cache hit, answered already: nothing in flight to poll for.
                        spinner = None
            except TritiumError as exc:
                loaded.stats.record_failure(now_ns() - request.arrival_ns, failure_reason(exc))
                raise
        except BaseException:
            if used is not None:
                used.lease.release()
            raise
        recorder = None
        if self.trace_settings.active and self._traced(loaded, request):
            recorder = self.recorder
        # Registered before the frontend's own callback: it sees the settled response.
        if (
            used is None
            and spinner is None
            and recorder is None
            and loaded.reshaper is None
            and request.classification is None
        ):
            # The usual request: of settle's steps only the statistics apply.
            done.add_done_callback(partial(settle_plain, loaded, request))
            return done
        if spinner is not None:
            spinner.begin()
        done.add_done_callback(partial(settle, loaded, request, used, spinner, recorder))
        return done

    def _traced(self, loaded: ServedVersion, request: InferRequest) -> bool:
        """Whether this request gets a trace (tracing is on): sampled under its model's
        rate and count, or, in OpenTelemetry mode, sent with the client's trace context."""
        sampler = self.trace_settings.sampler_for(loaded.name)
        if sampler is None:
            return False
        if request.trace_context is not None and self.trace_settings.opentelemetry is not None:
            return True
        return sampler.sample()

    def _submit_decoupled(
        self, loaded: ServedVersion, request: InferRequest, stream: Emit | None
    ) -> DecoupledCall:
        if stream is None:
            raise DecoupledRefused(DECOUPLED_UNARY)
        if request.shared_memory:
            raise Unsupported("shared-memory tensors are not supported with decoupled models")
        loaded.signature.validate(request)
        call = DecoupledCall(loaded, request, stream)
        request.responses = call
        if self.trace_settings.active and self._traced(loaded, request):
            call.traced(self.recorder)
        request.arrival_ns = now_ns()
        try:
            scheduled = loaded.scheduler.submit(request)
        except TritiumError:
            loaded.stats.record_request(False, now_ns() - request.arrival_ns, 0)
            raise
        call.start(scheduled)
        return call

    def _attach_shared_memory(self, request: InferRequest) -> RequestRegions:
        """Read the request's shared-memory inputs and lease its regions."""
        if not self.allow_client_shm:
            raise Unsupported(SHM_DISABLED)
        return attach_request(self.shared_memory, request)


def settle(
    loaded: ServedVersion,
    request: InferRequest,
    used: RequestRegions | None,
    spinner: RequestSpinner | None,
    recorder: Recorder | None,
    done: Completion[InferResponse],
) -> None:
    """The one done-callback of a (non-decoupled) request, in this order:

    1. reshape the outputs to the config's ``reshape`` (when the model has one);
    2. classification: replace the outputs asked for by their top classes;
    3. shared memory: write outputs into the client's regions (an error the client caused,
       e.g. a truncated object, becomes the response's error), then release the regions,
       whatever happened before;
    4. stamp the response with the model, version and request id, and count it in the
       model's statistics (success, or the failure's reason);
    5. the spinner: one client request fewer in flight;
    6. tracing: record the sampled request's timestamps.

    Steps 1-3 run only on a successful response, so statistics, shared memory and the
    frontend (whose callback runs after this one) see the outputs as the client gets them.
    Steps 4-6 always run, even when an earlier step raised. A request that needs none of
    the optional steps (1-3, 5, 6) is settled by :func:`settle_plain` instead: step 4 alone.
    """
    cancelled = done.cancelled()
    exc = None if cancelled else done.exception()
    response = None if cancelled or exc is not None else done.result()
    try:
        if response is not None and response.error is None:
            if loaded.reshaper is not None:
                loaded.reshaper.apply(response)
            if request.classification is not None:
                loaded.classifier.apply(response, request.classification)
            if used is not None:
                try:
                    write_outputs(response, used)
                except TritiumError as error:
                    response.error = error
    finally:
        if used is not None:
            used.lease.release()
        start = request.arrival_ns
        stats = loaded.stats
        if response is None:
            stats.record_failure(
                now_ns() - start, CANCELED if exc is None else failure_reason(exc)
            )
        else:
            response.model_name = loaded.name
            response.model_version = loaded.version_str
            response.id = request.id
            if response.error is None:
                stats.record_request(True, now_ns() - start, request.dispatch_ns - start)
            else:
                stats.record_failure(now_ns() - start, BACKEND)
        if spinner is not None:
            spinner.end()
        if recorder is not None:
            recorder.finish(loaded, request, done)


def settle_plain(
    loaded: ServedVersion, request: InferRequest, done: Completion[InferResponse]
) -> None:
    """:func:`settle` for a request without shared memory, classification, reshape,
    tracing or spinner: stamp the response and count it (step 4)."""
    start = request.arrival_ns
    if done.cancelled():
        loaded.stats.record_failure(now_ns() - start, CANCELED)
        return
    exc = done.exception()
    if exc is not None:
        loaded.stats.record_failure(now_ns() - start, failure_reason(exc))
        return
    response = done.result()
    response.model_name = loaded.name
    response.model_version = loaded.version_str
    response.id = request.id
    if response.error is None:
        loaded.stats.record_request(True, now_ns() - start, request.dispatch_ns - start)
    else:
        loaded.stats.record_failure(now_ns() - start, BACKEND)
