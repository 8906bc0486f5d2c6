"""The transport-neutral API both frontends call: health, metadata, config, infer,
system shared memory.

Behaviour lives here once; HTTP and gRPC only decode, call, encode and map errors.
"""

from __future__ import annotations

from functools import partial
from typing import Any

from tritium import __version__
from tritium.core import Completion, InferRequest, InferResponse
from tritium.core.clock import now_ns
from tritium.core.errors import (
    DecoupledRefused,
    InvalidArgument,
    NotFound,
    TritiumError,
    Unavailable,
    Unsupported,
)
from tritium.core.statistics import BACKEND, CANCELED
from tritium.service.composition.bls import BlsEndpoint
from tritium.service.lifecycle.manager import ModelManager
from tritium.service.lifecycle.repository_api import EXTENSIONS as REPOSITORY_EXTENSIONS
from tritium.service.lifecycle.repository_api import ModelCodeControl, RepositoryControl
from tritium.service.log_settings import LogSettings
from tritium.service.model.classification import OutputClassifier
from tritium.service.model.reshape import OutputReshaper
from tritium.service.model.version import LoadedVersion
from tritium.service.requests.failures import failure_reason
from tritium.service.requests.spin import LoneRequestSpinner
from tritium.service.requests.streams import DecoupledCall, Emit
from tritium.service.shared_memory.registry import (
    RequestRegions,
    SharedMemoryRegistry,
    attach_request,
    write_outputs,
)
from tritium.service.tracing.recorders import new_recorder
from tritium.service.tracing.settings import TraceSettings

EXTENSIONS = [
    "classification",
    "statistics",
    "schedule_policy",
    "binary_tensor_data",
    "parameters",
    "model_configuration",
    "logging",
    "trace",
    "sequence",
]
# Listed only when clients may register regions. "cuda_shared_memory" is never listed:
# without a CUDA runtime its register call can only fail (see ``cuda_shm_*``).
SHM_EXTENSION = "system_shared_memory"
SHM_DISABLED = (
    "client shared memory is disabled on this server (--allow-client-shm=false): send "
    "tensor data in the request instead"
)


DECOUPLED_UNARY = "this endpoint doesn't support models with decoupled transaction policy"
CUDA_SHM_UNSUPPORTED = (
    "CUDA shared memory is not supported: this server has no CUDA runtime; use system "
    "shared memory instead"
)


class Service:
    def __init__(
        self,
        models: ModelManager,
        *,
        server_id: str = "triton",
        strict_readiness: bool = True,
        allow_client_shm: bool = True,
        shared_memory: SharedMemoryRegistry | None = None,
        log_settings: LogSettings | None = None,
        trace_startup: dict[str, Any] | None = None,
        model_control_mode: str = "none",
        spinner: LoneRequestSpinner | None = None,
    ) -> None:
        self.models = models
        self.repository = RepositoryControl(models, model_control_mode)
        # Ensemble steps and BLS requests enter here, outside the count of client requests.
        models.submit_step = self.submit_step
        # Polls the loop while one client request is in flight (off unless given: the
        # server passes its --busy-poll settings).
        self.spinner = spinner if spinner is not None else LoneRequestSpinner(0, 0)
        # What client requests are counted by: nothing (no cost per request) when off.
        self._counted: LoneRequestSpinner | None = None
        if self.spinner.enabled:
            self._counted = self.spinner
            models.lone_request = self.spinner.lone
        models.call_handler = BlsEndpoint(self, ModelCodeControl(self.repository))
        self.server_id = server_id
        self.strict_readiness = strict_readiness
        self.started = False
        self.stopping = False
        self.allow_client_shm = allow_client_shm
        self.shared_memory = shared_memory if shared_memory is not None else SharedMemoryRegistry()
        # The logging extension's live settings (see service/log_settings.py).
        self.log_settings = log_settings if log_settings is not None else LogSettings()
        # The trace extension: settings, sampling, and the trace file (see service/tracing/).
        self.trace_settings = TraceSettings(trace_startup, lambda name: name in models.models)
        self.trace_recorder = new_recorder(self.trace_settings)
        extensions = EXTENSIONS + [SHM_EXTENSION] if allow_client_shm else EXTENSIONS
        self._extensions = extensions + list(REPOSITORY_EXTENSIONS)

    # -- health and metadata ---------------------------------------------------------------

    def live(self) -> bool:
        return True

    def ready(self) -> bool:
        if not self.started or self.stopping:
            return False
        return self.models.all_ready() if self.strict_readiness else True

    def not_ready_reason(self) -> str:
        """Why :meth:`ready` is false, for an operator: the models that keep the server
        not ready under strict readiness, and why each one is not."""
        if self.stopping:
            return "the server is shutting down"
        if not self.started:
            return "the server is starting: models are still loading"
        reasons = self.models.not_ready_reasons() if self.strict_readiness else []
        if not reasons:
            return "the server is not ready"
        return (
            "the server is not ready because not every model is ready (--strict-readiness="
            "true): " + "; ".join(reasons)
        )

    def server_metadata(self) -> dict[str, Any]:
        return {"name": self.server_id, "version": __version__, "extensions": self._extensions}

    def model_ready(self, name: str, version: str) -> bool:
        try:
            return self.models.get(name, version).ready
        except Unavailable:
            return False

    def model_metadata(self, name: str, version: str) -> dict[str, Any]:
        loaded = self.models.get(name, version)
        entry = self.models.models[name]
        if version:
            versions = [loaded.version_str]  # Triton lists only the version asked for
        else:
            versions = [
                str(v) for v in sorted(entry.versions) if entry.versions[v].loaded is not None
            ]
        sig = loaded.signature
        return {
            "name": name,
            "versions": versions,
            "platform": loaded.config.get("platform") or loaded.config.get("backend", ""),
            "inputs": sig.metadata_tensors("inputs"),
            "outputs": sig.metadata_tensors("outputs"),
        }

    def model_config(self, name: str, version: str) -> dict[str, Any]:
        return self.models.get(name, version).config

    def model_statistics(self, name: str, version: str) -> dict[str, Any]:
        """Triton's statistics extension: all models when ``name`` is empty."""
        stats = []
        if not name:
            for model in sorted(self.models.models):
                entry = self.models.models[model]
                for number in sorted(entry.versions):
                    loaded = entry.versions[number].loaded
                    if loaded is not None:
                        stats.append(loaded.stats.as_json(model, loaded.version_str))
            return {"model_stats": stats}
        entry = self.models.models.get(name)
        if entry is None:
            raise InvalidArgument(f"requested model '{name}' is not available")
        if version:
            try:
                loaded = self.models.get(name, version)
            except InvalidArgument:
                raise  # a version string that is no version: Triton's own text
            except TritiumError:
                raise InvalidArgument(
                    f"requested model version is not available for model '{name}'"
                ) from None
            return {"model_stats": [loaded.stats.as_json(name, loaded.version_str)]}
        for number in sorted(entry.versions):
            loaded = entry.versions[number].loaded
            if loaded is not None:
                stats.append(loaded.stats.as_json(name, loaded.version_str))
        return {"model_stats": stats}

    # -- inference ---------------------------------------------------------------------------

    def submit(
        self, request: InferRequest, stream: Emit | None = None
    ) -> Completion[InferResponse]:
        """Validate and schedule ``request`` now; the future gets the response.

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

    def _submit(
        self, request: InferRequest, stream: Emit | None, spinner: LoneRequestSpinner | None
    ) -> Completion[InferResponse]:
        if self.stopping:
            raise Unavailable("Server is shutting down")
        loaded = self.models.get(request.model_name, request.model_version)
        if loaded.decoupled:
            return self._submit_decoupled(loaded, request, stream)  # type: ignore[return-value]
        used = self._attach_shared_memory(request) if request.shared_memory else None
        try:
            loaded.signature.validate(request)
            request.arrival_ns = now_ns()
            try:
                done = loaded.scheduler.submit(request)
            except TritiumError as exc:
                loaded.stats.record_failure(now_ns() - request.arrival_ns, failure_reason(exc))
                raise
        except BaseException:
            if used is not None:
                used.lease.release()
            raise
        # Before any other callback, so statistics, shared memory and the frontend see the
        # outputs as the client gets them.
        if loaded.reshaper is not None:
            done.add_done_callback(partial(_reshape_outputs, loaded.reshaper))
        if request.classification is not None:
            done.add_done_callback(
                partial(_classify_outputs, loaded.classifier, request.classification)
            )
        if used is not None:
            # Registered before the frontend's callback, so outputs are in place (or the
            # response carries the error) when the frontend encodes.
            done.add_done_callback(partial(_finish_shm, used))
        done.add_done_callback(partial(_finish, loaded, request))
        if spinner is not None:
            spinner.begin()
            done.add_done_callback(spinner.end)
        if self.trace_settings.active and self._traced(loaded, request):
            done.add_done_callback(partial(self.trace_recorder.finish, loaded, request))
        return done

    def _traced(self, loaded: LoadedVersion, request: InferRequest) -> bool:
        """Whether this request gets a trace (tracing is on): sampled under its model's
        rate and count, or, in OpenTelemetry mode, sent with the client's trace context."""
        sampler = self.trace_settings.sampler_for(loaded.name)
        if sampler is None:
            return False
        if request.trace_context is not None and self.trace_settings.opentelemetry is not None:
            return True
        return sampler.sample()

    def is_decoupled(self, name: str, version: str) -> bool:
        """Whether the model (version) uses the decoupled transaction policy."""
        return self.models.get(name, version).decoupled

    def _submit_decoupled(
        self, loaded: LoadedVersion, request: InferRequest, stream: Emit | None
    ) -> DecoupledCall:
        if stream is None:
            raise DecoupledRefused(DECOUPLED_UNARY)
        if request.shared_memory:
            raise Unsupported("shared-memory tensors are not supported with decoupled models")
        loaded.signature.validate(request)
        call = DecoupledCall(loaded, request, stream)
        request.responses = call
        if self.trace_settings.active and self._traced(loaded, request):
            call.traced(self.trace_recorder)
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

    async def infer(self, request: InferRequest) -> InferResponse:
        return await self.submit(request)

    # -- model repository (Triton's model repository extension) -----------------------------

    async def repository_index(self, ready_only: bool = False) -> list[dict[str, Any]]:
        """``[{"name", "version"?, "state"?, "reason"?}]`` for every model folder."""
        return await self.repository.index(ready_only)

    async def load_model(self, name: str, parameters: dict[str, Any] | None = None) -> None:
        """Load or reload ``name``; parameters: ``config`` (str), ``file:<path>`` (bytes)."""
        await self.repository.load(name, parameters)

    async def unload_model(self, name: str, unload_dependents: bool = False) -> None:
        await self.repository.unload(name, unload_dependents)

    # -- system shared memory (Triton's shared-memory extension) ----------------------------

    def shm_register(self, name: str, key: str, offset: int, byte_size: int) -> None:
        """Register ``[offset, offset+byte_size)`` of the POSIX shm object ``key``."""
        if not self.allow_client_shm:
            raise Unsupported(SHM_DISABLED)
        self.shared_memory.register(name, key, offset, byte_size)

    def shm_status(self, name: str = "") -> list[dict[str, Any]]:
        """``[{"name", "key", "offset", "byte_size"}]``: every region, or the one named."""
        return self.shared_memory.status(name)

    def shm_unregister(self, name: str = "") -> None:
        """Unregister the region named, or every region when ``name`` is ""."""
        self.shared_memory.unregister(name)

    def cuda_shm_status(self, name: str = "") -> list[dict[str, Any]]:
        """No CUDA region can exist: all of them is none, one of them is not found."""
        if name:
            if self.shared_memory.has(name):
                raise NotFound(
                    f"The region named '{name}' is registered as system shared memory, not "
                    "CUDA shared memory"
                )
            raise NotFound(f"Unable to find cuda shared memory region: '{name}'")
        return []

    def cuda_shm_register(self, name: str, raw_handle: bytes, device_id: int, byte_size: int) -> None:
        raise Unsupported(CUDA_SHM_UNSUPPORTED)

    def cuda_shm_unregister(self, name: str = "") -> None:
        """Nothing is registered, so there is nothing to do (Triton answers success too)."""

    def close(self) -> None:
        """Release server-wide resources (shared-memory mappings) at shutdown."""
        self.shared_memory.close()


def _reshape_outputs(reshaper: OutputReshaper, done: Completion) -> None:
    if not done.cancelled() and done.exception() is None:
        response = done.result()
        if response.error is None:
            reshaper.apply(response)


def _classify_outputs(classifier: OutputClassifier, wanted: dict[str, int], done: Completion) -> None:
    if not done.cancelled() and done.exception() is None:
        response = done.result()
        if response.error is None:
            classifier.apply(response, wanted)


def _finish_shm(used: RequestRegions, done: Completion) -> None:
    """Write shared-memory outputs, then hand the request's regions back."""
    try:
        if not done.cancelled() and done.exception() is None:
            response = done.result()
            if response.error is None:
                try:
                    write_outputs(response, used)
                except TritiumError as exc:  # e.g. the client truncated its object
                    response.error = exc
    finally:
        used.lease.release()


def _finish(loaded: LoadedVersion, request: InferRequest, done: Completion) -> None:
    """Stamp the response with what the client asked for and count it."""
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
