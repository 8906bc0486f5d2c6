"""Load an OpenVINO model in a worker: open ``model.xml``, auto-complete the configuration
from the model's signature (the onnxruntime backend's rules), and hand the worker's model
host a model class."""

from __future__ import annotations

import functools
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from tritium.backends.openvino.model import OpenVinoModel
from tritium.backends.openvino.runtime import (
    OPENVINO_BACKEND,
    OpenVinoLoadError,
    import_openvino,
    model_path,
    read_model,
    signature,
)
from tritium.config import ConfigError, config_from_dict, config_to_json
from tritium.config.onnx_complete import DEFAULT_MAX_BATCH_SIZE, complete_onnx_config

BACKEND_SETTING_MAX_BATCH = "default-max-batch-size"


def load(
    name: str,
    version: str,
    config: dict[str, Any],
    version_dir: Path,
    *,
    auto_complete: bool,
    backend_config: Iterable[Sequence[str]] = (),
) -> tuple[Any, dict]:
    """The model class for the worker (called with no arguments per instance) and the
    configuration, auto-completed from the model when ``auto_complete``."""
    import_openvino()  # fails first, with the extra to install
    if config.get("model_transaction_policy", {}).get("decoupled"):
        raise OpenVinoLoadError(
            f"model '{name}': the openvino backend does not serve decoupled models"
        )
    pb = config_from_dict(config)
    if not pb.name:
        pb.name = name
    path = model_path(version_dir, pb.default_model_filename, name, version)
    inputs, outputs = signature(read_model(path)) if auto_complete else ([], [])
    try:
        if auto_complete:
            pb = complete_onnx_config(
                pb,
                inputs,
                outputs,
                default_max_batch_size=_default_max_batch_size(backend_config),
                backend=OPENVINO_BACKEND,
                platform="",
                graph_kind="OpenVINO",
            )
        elif not pb.backend:
            pb.backend = OPENVINO_BACKEND
    except ConfigError as exc:
        raise OpenVinoLoadError(exc.message) from None
    return functools.partial(OpenVinoModel, path, name), config_to_json(pb)


def _default_max_batch_size(backend_config: Iterable[Sequence[str]]) -> int:
    """``--backend-config=openvino,default-max-batch-size=N``, else the global one, else 4."""
    found = {
        backend: value
        for backend, setting, value in backend_config
        if backend in (OPENVINO_BACKEND, "") and setting == BACKEND_SETTING_MAX_BATCH
    }
    value = found.get(OPENVINO_BACKEND, found.get(""))
    if value is None:
        return DEFAULT_MAX_BATCH_SIZE
    try:
        return int(value)
    except ValueError:
        raise OpenVinoLoadError(
            f"--backend-config {BACKEND_SETTING_MAX_BATCH} must be an integer, got '{value}'"
        ) from None
