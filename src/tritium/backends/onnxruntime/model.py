"""One instance of an ONNX model: its ``InferenceSession``, and a batch of requests run
through it as one ``session.run``.

The instance is hosted by the worker exactly like a ``TritonPythonModel`` (initialize,
execute a list of requests, finalize), so everything the worker does for Python models —
dynamic batching, ensembles, BLS, warm-up, statistics, restarts — holds for it too.
Inputs reach ORT as the numpy views over the worker's shared-memory arena (ORT reads
contiguous CPU arrays in place); joining a batch's requests and splitting the outputs
back is :class:`~tritium.backends.graph_model.GraphModel`'s.
"""

from __future__ import annotations

import ctypes
import json
from pathlib import Path
from typing import Any

import numpy as np

from tritium.backends.graph_model import GraphModel
from tritium.backends.onnxruntime.session import (
    OnnxLoadError,
    build_session,
    import_onnxruntime,
    signature,
)
from tritium.backends.onnxruntime.session_settings import SettingsError, session_settings
from tritium.backends.python.pb_utils_logger import Logger
from tritium.config import ConfigError, config_from_dict
from tritium.config.instance_devices import own_device_index, visible_device_index
from tritium.config.onnx_complete import complete_onnx_config

_BF16 = 16  # ONNX TensorProto.BFLOAT16


class OnnxModel(GraphModel):
    """A ``TritonPythonModel`` made of an ONNX file (see module docstring)."""

    runtime_name = "onnxruntime"

    def __init__(self, path: Path, model_name: str) -> None:
        self.path = path
        self.model_name = model_name
        self.session: Any = None
        self.run_options: Any = None

    def initialize(self, args: dict[str, str]) -> None:
        config = json.loads(args["model_config"])
        kind = args.get("model_instance_kind", "CPU")
        device_id = int(args.get("model_instance_device_id", "0") or 0)
        try:
            # The providers' device options: the instance's device as its worker sees it
            # (tritium.device_env may have narrowed it to that one device).
            settings = session_settings(
                config,
                kind=kind,
                device_id=visible_device_index(config, device_id),
                own_device=own_device_index(config, kind, device_id),
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
        self._setup(config)
        inputs = self.inputs
        self.bf16_inputs = {n for n in inputs if self.wire[n] == "BF16"}
        self.bf16_outputs = {n for n in self.outputs if self.wire[n] == "BF16"}
        self.ort = import_onnxruntime() if (self.bf16_inputs or self.bf16_outputs) else None
        if self.ort is not None and any(self.wire[n] == "BYTES" for n in inputs):
            # BF16 only passes as ORT values, and ORT's Python API makes none of strings.
            raise OnnxLoadError(
                f"model '{self.model_name}' has both BF16 tensors and STRING inputs, which "
                "onnxruntime's Python API cannot feed to one run"
            )

    def finalize(self) -> None:
        self.session = None

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


def _bf16_words(value: Any) -> np.ndarray:
    """An ORT BF16 value's raw 2-byte words, copied out as uint16."""
    shape = tuple(value.shape())
    count = int(np.prod(shape)) if shape else 1
    words = (ctypes.c_uint16 * count).from_address(value.data_ptr())
    return np.ctypeslib.as_array(words).reshape(shape).copy()
