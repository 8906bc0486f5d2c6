"""One instance of an OpenVINO model: the model compiled for the instance's device, and a
batch of requests run through one infer request.

Hosted by the worker like a ``TritonPythonModel``; joining a batch's requests and
splitting the outputs is :class:`~tritium.backends.graph_model.GraphModel`'s. Inputs are
handed to OpenVINO as the numpy views over the worker's shared-memory arena
(``share_inputs``: not copied).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tritium.backends.graph_model import GraphModel
from tritium.backends.openvino.compile_settings import CompileSettingsError, compile_settings
from tritium.backends.openvino.runtime import (
    OPENVINO_BACKEND,
    OpenVinoLoadError,
    compile_model,
    signature,
)
from tritium.backends.python.pb_utils_logger import Logger
from tritium.config import ConfigError, config_from_dict
from tritium.config.instance_devices import own_device_index
from tritium.config.onnx_complete import complete_onnx_config


class OpenVinoModel(GraphModel):
    """A ``TritonPythonModel`` made of an OpenVINO IR model (see module docstring)."""

    runtime_name = "openvino"

    def __init__(self, path: Path, model_name: str) -> None:
        self.path = path
        self.model_name = model_name
        self.compiled: Any = None
        self.request: Any = None

    def initialize(self, args: dict[str, str]) -> None:
        config = json.loads(args["model_config"])
        device_id = int(args.get("model_instance_device_id", "0") or 0)
        kind = args.get("model_instance_kind", "CPU")
        try:
            settings = compile_settings(
                config, device_index=own_device_index(config, kind, device_id)
            )
        except CompileSettingsError as exc:
            raise OpenVinoLoadError(f"model '{self.model_name}': {exc}") from None
        self.settings = settings
        self.compiled = compile_model(self.path, settings, self.model_name)
        Logger.log_info(
            f"openvino model for '{args.get('model_instance_name', self.model_name)}' "
            f"compiled for {settings.device}: "
            + " ".join(f"{key}={value}" for key, value in settings.properties)
        )
        try:
            # The configuration must still match the model this instance compiled.
            complete_onnx_config(
                config_from_dict(config),
                *signature(self.compiled),
                auto_complete=False,
                backend=OPENVINO_BACKEND,
                platform="",
                graph_kind="OpenVINO",
            )
        except ConfigError as exc:
            raise OpenVinoLoadError(exc.message) from None
        self._setup(config)
        bf16 = [name for name, wire in self.wire.items() if wire == "BF16"]
        if bf16:
            # numpy has no bfloat16, and OpenVINO reads numpy's uint16 as numbers.
            raise OpenVinoLoadError(
                f"model '{self.model_name}': tensor '{bf16[0]}' is BF16, which the openvino "
                "backend does not exchange yet (use an f32 or f16 port)"
            )
        self.ports = {port.get_any_name(): port for port in self.compiled.outputs}
        self.request = self.compiled.create_infer_request()

    def finalize(self) -> None:
        self.request = None
        self.compiled = None

    def _run(self, feeds: dict[str, Any], names: list[str]) -> list[Any]:
        results = self.request.infer(feeds, share_inputs=True)
        return [results[self.ports[name]] for name in names]
