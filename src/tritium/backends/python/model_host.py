"""Hosts one ``TritonPythonModel`` inside a worker: load, auto-complete, initialize,
execute batches against arena-backed tensors, finalize. A batch's requests are built in
``batch_inputs``, its responses collected and written in ``batch_outputs``.

Everything user code can get wrong (raising, returning the wrong number or kind of
responses, bad output tensors) becomes a per-request error with a clear message; the
instance keeps serving.
"""

from __future__ import annotations

import asyncio
import importlib.util
import inspect
import json
import sys
import time
from pathlib import Path
from typing import Any

from tritium.backends.graph_batches import Collected, batch_feeds, run_items
from tritium.backends.python import pb_utils
from tritium.backends.python.batch_inputs import Refs, build_requests
from tritium.backends.python.batch_outputs import collect, write_outputs
from tritium.backends.python.coroutines import CoroutineRunner
from tritium.backends.python.output_checks import OutputChecks
from tritium.backends.python.pb_utils_errors import describe
from tritium.backends.python.pb_utils_logger import apply_startup_settings, log_exception
from tritium.backends.python.response_sender import ResponseSender, ResponseStream
from tritium.ipc import Arena
from tritium.ipc.messages import Init, Load, Need, ReplyItem, RequestItem, Result
from tritium.ipc.shared_arenas import KEEP_MIN_BYTES

#: A shared arena lent for a batch's outputs: (id, arena).
Keep = tuple[int, Arena]


def _flag_reader(buf: Any, slot: int) -> Any:
    return lambda: buf[slot] != 0


class ModelLoadError(Exception):
    code = "INVALID_ARG"


class ModelHost:
    def __init__(self, spec: Load) -> None:
        self.spec = spec
        self.model_name = spec.model_name
        self.version = spec.model_version
        self.model_dir = Path(spec.model_dir)
        self.config: dict[str, Any] = spec.config
        self._output_checks = OutputChecks(self.config)
        self.model_class: Any = None
        self.model: Any = None
        self.instance_name = self.model_name
        self._pending: list[tuple[int, list[Any]]] | None = None
        self._pending_replies: list[ReplyItem] | None = None
        self._pending_end = 0
        self._timing = [0, 0, 0]  # build inputs, execute, write outputs (ns)
        self._all_outputs: list[str] = []
        self._has_is_ready = False
        self._graph = False  # a graph backend's model (onnxruntime, openvino)
        self.decoupled = False
        self.coroutines = CoroutineRunner()

    # -- loading ------------------------------------------------------------------------

    def _graph_loader(self, version_dir: Path) -> Any:
        """The loading module of the graph backend (onnxruntime, openvino) serving this
        model, or None for a Python one. Asked only when the config does not name the
        python backend: the check imports tritium.config (and so tritonclient), which a
        model's own Python environment (EXECUTION_ENV_PATH) need not have."""
        from tritium.backends.graph_loaders import graph_loader

        return graph_loader(self.config, version_dir)

    def load(self) -> dict[str, Any] | None:
        """Import model.py; run ``auto_complete_config`` when asked. Returns the config
        after auto-complete (None when auto-complete did not run)."""
        sys.modules["triton_python_backend_utils"] = pb_utils
        pb_utils._set_model_dir(str(self.model_dir / self.version))
        apply_startup_settings(self.spec.log_verbose, str(self.model_dir.parent))
        version_dir = self.model_dir / self.version
        loader = None
        if self.config.get("backend") != "python":
            loader = self._graph_loader(version_dir)
        if loader is not None:
            self._graph = True
            self.model_class, self.config = loader.load(
                self.model_name,
                self.version,
                self.config,
                version_dir,
                auto_complete=self.spec.auto_complete,
                backend_config=self.spec.backend_config,
            )
            return self.config
        filename = self.config.get("default_model_filename") or "model.py"
        path = version_dir / filename
        if not path.is_file():
            raise ModelLoadError(
                f"unable to find '{filename}' in version {self.version} of model '{self.model_name}'"
            )
        sys.path.insert(0, str(version_dir))
        try:
            spec = importlib.util.spec_from_file_location("model", path)
            assert spec is not None and spec.loader is not None
            module = importlib.util.module_from_spec(spec)
            sys.modules["model"] = module
            spec.loader.exec_module(module)
        except Exception as exc:
            log_exception()
            raise ModelLoadError(
                f"failed to load model '{self.model_name}': {describe(exc)}"
            ) from exc
        model_class = getattr(module, "TritonPythonModel", None)
        if model_class is None:
            raise ModelLoadError(
                f"failed to load model '{self.model_name}': model.py does not define "
                "class 'TritonPythonModel'"
            )
        self.model_class = model_class
        if self.spec.auto_complete and hasattr(model_class, "auto_complete_config"):
            try:
                cfg = model_class.auto_complete_config(pb_utils.ModelConfig(self.config))
            except Exception as exc:
                log_exception()
                raise ModelLoadError(
                    f"auto_complete_config failed for model '{self.model_name}': {describe(exc)}"
                ) from exc
            if cfg is None or not hasattr(cfg, "as_dict"):
                raise ModelLoadError(
                    f"auto_complete_config of model '{self.model_name}' must return the "
                    "ModelConfig object it was given"
                )
            self.config = cfg.as_dict()
            return self.config
        return None

    def initialize(self, message: Init) -> None:
        self.config = message.config
        self._all_outputs = [o["name"] for o in self.config.get("output", ())]
        self._output_checks = OutputChecks(self.config)
        self.decoupled = bool(self.config.get("model_transaction_policy", {}).get("decoupled"))
        self.coroutines.inline = not self.decoupled
        self.instance_name = message.instance_name
        args = {
            "model_config": json.dumps(self.config),
            "model_instance_kind": message.kind,
            "model_instance_name": self.instance_name,
            "model_instance_device_id": str(message.device_id),
            "model_repository": str(self.model_dir),
            "model_version": self.version,
            "model_name": self.model_name,
        }
        try:
            self.model = self.model_class()
            init = getattr(self.model, "initialize", None)
            if init is not None:
                result = init(args)
                if asyncio.iscoroutine(result):
                    self.coroutines.run(result)
            self._has_is_ready = callable(getattr(self.model, "is_ready", None))
        except Exception as exc:
            log_exception()
            raise ModelLoadError(
                f"Failed to initialize model instance '{self.instance_name}': {describe(exc)}"
            ) from exc

    @property
    def has_readiness_check(self) -> bool:
        return self._has_is_ready

    def is_ready(self) -> bool:
        """The model's optional ``is_ready()``; reported after init and every execution."""
        check = getattr(self.model, "is_ready", None)
        if check is None:
            return self.model is not None
        try:
            return bool(check())
        except Exception:  # noqa: BLE001
            log_exception()
            return False

    @property
    def serves_coroutines(self) -> bool:
        """An ordinary model whose ``execute`` is a coroutine function: the worker runs its
        message loop on the model's event loop (see ``CoroutineRunner.serve``)."""
        return not self.decoupled and inspect.iscoroutinefunction(
            getattr(self.model, "execute", None)
        )

    def finalize(self) -> Any:
        """Run the model's ``finalize``; while the worker serves on the model's loop, a
        coroutine ``finalize`` is returned for the worker to await (then call
        :meth:`stop_coroutines`)."""
        model, self.model = self.model, None
        fin = getattr(model, "finalize", None)
        try:
            if fin is not None:
                result = fin()
                if asyncio.iscoroutine(result):
                    if self.coroutines.serving:
                        return result
                    self.coroutines.run(result)
        finally:
            if not self.coroutines.serving:
                self.coroutines.stop()
        return None

    def stop_coroutines(self) -> None:
        self.coroutines.stop()

    # -- execution ----------------------------------------------------------------------

    def execute(
        self,
        items: list[RequestItem | int],
        in_arena: Arena,
        out_arena: Arena,
        keep: Keep | None = None,
        refs: Refs | None = None,
    ) -> Any:
        """The reply to one batch (``Result`` or ``Need``), or (while the worker serves on the model's
        loop, for an ``async def execute``) a coroutine that returns it. ``keep`` (id,
        arena) is a shared arena lent for outputs of at least ``KEEP_MIN_BYTES``; ``refs``
        see ``batch_inputs.build_requests``. A graph model's batch of like requests runs
        straight from the items (``graph_batches``)."""
        t0 = time.monotonic_ns()
        if self._graph and refs is None:
            fed = batch_feeds(self.model, items, in_arena)
            if fed is not None:
                t1 = time.monotonic_ns()
                collected = run_items(self.model, *fed, len(items), self._output_checks)
                return self._place(collected, t0, t1, time.monotonic_ns(), out_arena, keep)
        requests = build_requests(
            items, in_arena, self.model_name, self.version, self._all_outputs, refs
        )
        n = len(requests)
        t1 = time.monotonic_ns()
        try:
            result = self.model.execute(requests)
            if type(result) is not list and asyncio.iscoroutine(result):
                if self.coroutines.serving:
                    # The worker awaits it (see ``CoroutineRunner.serve``).
                    return self._awaited(result, requests, t0, t1, out_arena, keep)
                result = self.coroutines.run(result)  # awaited, as Triton does
        except Exception as exc:
            return self._failed(exc, n, t0, t1)
        return self._finish(result, requests, t0, t1, out_arena, keep)

    async def _awaited(
        self,
        coro: Any,
        requests: list[Any],
        t0: int,
        t1: int,
        out_arena: Arena,
        keep: Keep | None = None,
    ) -> Result | Need:
        try:
            result = await coro
        except Exception as exc:
            return self._failed(exc, len(requests), t0, t1)
        return self._finish(result, requests, t0, t1, out_arena, keep)

    def _failed(self, exc: Exception, n: int, t0: int, t1: int) -> Result:
        log_exception()
        message = (
            f"Failed to process the request(s) for model "
            f"'{self.instance_name}', message: {describe(exc)}"
        )
        t2 = time.monotonic_ns()
        failed = ReplyItem(error=("INTERNAL", message))
        return Result([failed] * n, [t1 - t0, t2 - t1, 0])

    def _finish(
        self,
        result: Any,
        requests: list[Any],
        t0: int,
        t1: int,
        out_arena: Arena,
        keep: Keep | None = None,
    ) -> Result | Need:
        t2 = time.monotonic_ns()
        collected = collect(result, requests, self.instance_name, self._output_checks)
        return self._place(collected, t0, t1, t2, out_arena, keep)

    def _place(
        self, collected: Collected, t0: int, t1: int, t2: int, out_arena: Arena, keep: Keep | None
    ) -> Result | Need:
        """Write the collected outputs where they go (or ask for room for them); ``t0``..
        ``t2``: when building the inputs began, execution began, execution ended."""
        replies, placed, end = collected
        self._timing = [t1 - t0, t2 - t1, t2]
        if keep is not None and end >= KEEP_MIN_BYTES:
            # Large outputs of an ensemble step stay in the shared arena lent for them.
            keep_id, keep_arena = keep
            if end > keep_arena.size:
                return self._need(replies, placed, end, keep_id)
            return self.write_pending_to(replies, placed, keep_arena, end, keep_id)
        if end > out_arena.size:
            # Outputs do not fit: the server sends a bigger arena, then "continue".
            return self._need(replies, placed, end)
        return self._write(replies, placed, out_arena, end)

    def _need(self, replies: list[ReplyItem], placed: Any, end: int, keep_id: int = 0) -> Need:
        """Keep the collected outputs until the server lends room for ``end`` bytes (in
        the shared arena ``keep_id`` when given)."""
        self._pending_replies = replies
        self._pending = placed
        self._pending_end = end
        return Need(end, keep_id)

    def execute_decoupled(
        self,
        items: list[RequestItem | int],
        slots: list[int],
        in_arena: Arena,
        flags: Arena,
        stream: ResponseStream,
    ) -> Result:
        """Run ``execute`` for a decoupled model: every request gets a response sender
        for its slot (its cancellation flag is byte ``slot`` of ``flags``), and its
        responses travel on ``stream`` as they are sent. The reply only says the batch
        was taken; an ``async def execute`` goes on in the background."""
        t0 = time.monotonic_ns()
        requests = build_requests(items, in_arena, self.model_name, self.version, self._all_outputs)
        flag_buf = flags.buf
        senders = []
        for request, slot in zip(requests, slots):
            # The input arena takes the next batch while this one may still be running.
            for tensor in request._inputs:
                if tensor._array.dtype != object:
                    tensor._array = tensor._array.copy()
            cancelled = _flag_reader(flag_buf, slot)
            request._is_cancelled = cancelled
            sender = ResponseSender(stream, slot, request._requested_output_names, cancelled)
            request._response_sender = sender
            senders.append(sender)
        t1 = time.monotonic_ns()
        try:
            result = self.model.execute(requests)
            if asyncio.iscoroutine(result):
                future = self.coroutines.submit(result)
                future.add_done_callback(lambda done: self._decoupled_done(done, senders))
            elif result is not None:
                raise pb_utils.TritonModelException(
                    f"Python model '{self.instance_name}' is using the decoupled mode and the "
                    "execute function must return None."
                )
        except Exception as exc:
            log_exception()
            self._fail_senders(senders, exc)
        t2 = time.monotonic_ns()
        taken: list[ReplyItem | int] = [ReplyItem(outputs=[])]
        taken.extend([0] * (len(requests) - 1))
        return Result(taken, [t1 - t0, t2 - t1, 0])

    def _decoupled_done(self, done: Any, senders: list[ResponseSender]) -> None:
        exc = done.exception()
        if exc is not None:
            log_exception(exc)
            self._fail_senders(senders, exc)

    def _fail_senders(self, senders: list[ResponseSender], exc: BaseException) -> None:
        message = (
            f"Failed to process the request(s) for model '{self.instance_name}', "
            f"message: {describe(exc)}"
        )
        for sender in senders:
            sender._fail(message)

    def write_pending(self, arena: Arena, keep_id: int = 0) -> Result:
        """Write the outputs that did not fit, into ``arena`` (the shared arena
        ``keep_id`` when given)."""
        replies, pending = self._pending_replies, self._pending
        self._pending_replies = self._pending = None
        assert replies is not None and pending is not None
        return self.write_pending_to(replies, pending, arena, self._pending_end, keep_id)

    def write_pending_to(
        self, replies: list[ReplyItem], placed: list[Any], arena: Arena, end: int, keep_id: int
    ) -> Result:
        reply = self._write(replies, placed, arena, end)
        reply.kept = keep_id
        return reply

    def _write(self, replies: list[ReplyItem], placed: list[Any], arena: Arena, end: int) -> Result:
        items = write_outputs(replies, placed, arena)
        timing = self._timing
        timing[2] = time.monotonic_ns() - timing[2]
        return Result(items, timing, end)
