"""One instance of an ONNX model: its ``InferenceSession``, and a batch of requests run
through it as one ``session.run``.

The instance is hosted by the worker exactly like a ``TritonPythonModel`` (initialize,
execute a list of requests, finalize), so everything the worker does for Python models —
dynamic batching, ensembles, BLS, warm-up, statistics, restarts — holds for it too.
Inputs reach ORT as the numpy views over the worker's shared-memory arena (ORT reads
contiguous CPU arrays in place); requests of a batch are joined along the batch dimension
for one run and the outputs split back per request.
"""

from __future__ import annotations

import ctypes
import json
from pathlib import Path
from typing import Any

import numpy as np

from tritium.backends.onnxruntime.session import (
    OnnxLoadError,
    build_session,
    import_onnxruntime,
    signature,
)
from tritium.backends.onnxruntime.session_settings import SettingsError, session_settings
from tritium.backends.python.pb_utils_errors import TritonError
from tritium.backends.python.pb_utils_logger import Logger
from tritium.backends.python.pb_utils_messages import InferenceResponse
from tritium.backends.python.pb_utils_tensor import Tensor
from tritium.config import ConfigError, config_from_dict
from tritium.config.instance_devices import visible_device_index
from tritium.config.onnx_complete import complete_onnx_config
from tritium.core.datatypes import config_to_wire

_BF16 = 16  # ONNX TensorProto.BFLOAT16
_new_tensor = Tensor._from_buffer


class OnnxModel:
    """A ``TritonPythonModel`` made of an ONNX file (see module docstring)."""

    def __init__(self, path: Path, model_name: str) -> None:
        self.path = path
        self.model_name = model_name
        self.session: Any = None
        self.run_options: Any = None

    def initialize(self, args: dict[str, str]) -> None:
        config = json.loads(args["model_config"])
        try:
            settings = session_settings(
                config,
                kind=args.get("model_instance_kind", "CPU"),
                # The provider's device option: the instance's device as its worker
                # sees it (tritium.device_env may have narrowed it to that one device).
                device_id=visible_device_index(
                    config, int(args.get("model_instance_device_id", "0") or 0)
                ),
            )
        except SettingsError as exc:
            raise OnnxLoadError(f"model '{self.model_name}': {exc}") from None
        self.settings = settings
        self.session, self.run_options = build_session(self.path, settings, self.model_name)
        Logger.log_info(
            f"onnxruntime session for '{args.get('model_instance_name', self.model_name)}': "
            f"intra_op_thread_count={settings.intra_op_threads} "
            f"inter_op_thread_count={settings.inter_op_threads} "
            f"execution_mode={'parallel' if settings.parallel else 'sequential'} "
            f"graph_optimization={settings.graph_level} "
            f"providers={','.join(self.session.get_providers())}"
        )
        try:
            # The configuration as completed (or written, without auto-complete) must
            # still match the graph this instance opened.
            complete_onnx_config(
                config_from_dict(config), *signature(self.session), auto_complete=False
            )
        except ConfigError as exc:
            raise OnnxLoadError(exc.message) from None
        self.batching = int(config.get("max_batch_size", 0)) > 0
        self.outputs = [o["name"] for o in config.get("output", ())]
        self.wire = {
            io["name"]: config_to_wire(io.get("data_type", "TYPE_FP32"))
            for io in (*config.get("input", ()), *config.get("output", ()))
        }
        self.input_reshape = _reshapes(config.get("input", ()), "model")
        self.output_reshape = _reshapes(config.get("output", ()), "config")
        inputs = [i["name"] for i in config.get("input", ())]
        self.bf16_inputs = {n for n in inputs if self.wire[n] == "BF16"}
        self.bf16_outputs = {n for n in self.outputs if self.wire[n] == "BF16"}
        self.strings = {name for name, wire in self.wire.items() if wire == "BYTES"}
        self.ort = import_onnxruntime() if (self.bf16_inputs or self.bf16_outputs) else None
        if self.ort is not None and any(self.wire[n] == "BYTES" for n in inputs):
            # BF16 only passes as ORT values, and ORT's Python API makes none of strings.
            raise OnnxLoadError(
                f"model '{self.model_name}' has both BF16 tensors and STRING inputs, which "
                "onnxruntime's Python API cannot feed to one run"
            )

    def execute(self, requests: list[Any]) -> list[InferenceResponse]:
        if len(requests) == 1:
            return [self._run_requests(requests, False)[0]]
        if self.batching:
            if _uniform(requests):
                return self._run_requests(requests, True)
        return [self._run_requests([r], False)[0] for r in requests]

    def finalize(self) -> None:
        self.session = None

    # -- running ------------------------------------------------------------------------

    def _run_requests(self, requests: list[Any], joined: bool) -> list[InferenceResponse]:
        wanted: set[str] = set()
        for request in requests:
            wanted |= request._requested_output_names
        names = [n for n in self.outputs if n in wanted]
        try:
            feeds, sizes = self._feeds(requests, joined)
            results = self._run(feeds, names)
        except Exception as exc:  # noqa: BLE001 - ORT's own exception types
            error = TritonError(f"onnxruntime: {exc}")
            return [InferenceResponse(error=error) for _ in requests]
        if not joined:
            return [InferenceResponse(self._tensors(names, results, None))]
        responses = []
        start = 0
        for request, size in zip(requests, sizes):
            part = slice(start, start + size)
            start += size
            want = request._requested_output_names
            tensors = self._tensors(names, results, part)
            responses.append(InferenceResponse([t for t in tensors if t._name in want]))
        return responses

    def _feeds(self, requests: list[Any], joined: bool) -> tuple[dict[str, Any], list[int]]:
        if not joined:
            feeds = {t._name: self._model_array(t._name, t._array) for t in requests[0]._inputs}
            return feeds, []
        sizes = [r._inputs[0]._array.shape[0] for r in requests]
        columns: dict[str, list[Any]] = {}
        for request in requests:
            for tensor in request._inputs:
                columns.setdefault(tensor._name, []).append(tensor._array)
        feeds = {
            name: self._model_array(name, np.concatenate(arrays))
            for name, arrays in columns.items()
        }
        return feeds, sizes

    def _model_array(self, name: str, array: Any) -> Any:
        shape = self.input_reshape.get(name)
        if shape is not None:
            lead = array.shape[:1] if self.batching else ()
            array = array.reshape(lead + shape)
        if name in self.strings:
            # ORT's strings are text: Triton's BYTES elements are taken as UTF-8.
            flat = [b.decode("utf-8") if isinstance(b, bytes) else str(b) for b in array.ravel()]
            array = np.array(flat, dtype=object).reshape(array.shape)
        return array

    def _run(self, feeds: dict[str, Any], names: list[str]) -> list[Any]:
        if self.ort is None:
            return self.session.run(names, feeds, self.run_options)  # type: ignore[no-any-return]
        # BF16 has no numpy type: its uint16 words go in and come out as ORT values.
        value = self.ort.OrtValue
        values = {
            name: value.ortvalue_from_numpy_with_onnx_type(array, _BF16)
            if name in self.bf16_inputs
            else value.ortvalue_from_numpy(array)
            for name, array in feeds.items()
        }
        outs = self.session.run_with_ort_values(names, values, self.run_options)
        return [
            _bf16_words(out) if name in self.bf16_outputs else out.numpy()
            for name, out in zip(names, outs)
        ]

    def _tensors(self, names: list[str], results: list[Any], part: slice | None) -> list[Tensor]:
        tensors = []
        for name, array in zip(names, results):
            if part is not None:
                array = array[part]
            wire = self.wire[name]
            if wire == "BYTES":
                array = np.array(
                    [s.encode("utf-8") if isinstance(s, str) else bytes(s) for s in array.ravel()],
                    dtype=object,
                ).reshape(array.shape)
            shape = self.output_reshape.get(name)
            if shape is not None and shape.count(-1) <= 1:
                lead = array.shape[:1] if self.batching else ()
                array = array.reshape(lead + shape)
            tensors.append(_new_tensor(name, np.ascontiguousarray(array), wire))
        return tensors


def _reshapes(ios: Any, side: str) -> dict[str, tuple[int, ...]]:
    """Tensors the model sees in another shape (``reshape``), by name: to the model's
    shape (``side`` "model", for inputs) or to the configuration's ``dims`` ("config",
    for outputs)."""
    found: dict[str, tuple[int, ...]] = {}
    for io in ios:
        if "reshape" in io:
            dims = io["reshape"].get("shape", ()) if side == "model" else io.get("dims", ())
            found[io["name"]] = tuple(int(d) for d in dims)
    return found


def _uniform(requests: list[Any]) -> bool:
    """Whether the requests can be joined along the batch dimension: the same inputs,
    in the same order, with the same shape after the batch dimension."""
    first = requests[0]._inputs
    names = [t._name for t in first]
    tails = [t._array.shape[1:] for t in first]
    for request in requests[1:]:
        inputs = request._inputs
        if len(inputs) != len(names):
            return False
        for tensor, name, tail in zip(inputs, names, tails):
            if tensor._name != name or tensor._array.shape[1:] != tail:
                return False
    return bool(names)


def _bf16_words(value: Any) -> np.ndarray:
    """An ORT BF16 value's raw 2-byte words, copied out as uint16."""
    shape = tuple(value.shape())
    count = int(np.prod(shape)) if shape else 1
    words = (ctypes.c_uint16 * count).from_address(value.data_ptr())
    return np.ctypeslib.as_array(words).reshape(shape).copy()
