"""Load an ONNX model in a worker: tell it from a Python one, open the file, auto-complete
the configuration from the graph, and hand the worker's model host a model class.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from tritium.backends.onnxruntime.model import OnnxModel
from tritium.backends.onnxruntime.session import (
    OnnxLoadError,
    import_onnxruntime,
    model_path,
    probe_session,
    signature,
)
from tritium.config import ConfigError, config_from_dict, config_to_json
from tritium.config.backends import detect_backend
from tritium.config.onnx_complete import (
    DEFAULT_MAX_BATCH_SIZE,
    ONNXRUNTIME_BACKEND,
    complete_onnx_config,
)

BACKEND_SETTING_MAX_BATCH = "default-max-batch-size"


def serves(config: dict[str, Any], version_dir: Path) -> bool:
    """Whether the model (its configuration so far, its version folder) is an ONNX one."""
    try:
        names = set(os.listdir(version_dir))
    except OSError:
        names = set()
    backend = detect_backend(
        str(config.get("backend", "")),
        str(config.get("platform", "")),
        str(config.get("default_model_filename", "")),
        names,
    )
    return backend == ONNXRUNTIME_BACKEND


def load(
    name: str,
    version: str,
    config: dict[str, Any],
    version_dir: Path,
    *,
    auto_complete: bool,
    backend_config: Iterable[Sequence[str]] = (),
) -> tuple[Any, dict]:
    """The model class for the worker (called with no arguments per instance, like a
    ``TritonPythonModel``) and the configuration, auto-completed from the graph when
    ``auto_complete`` (otherwise only the backend fields are filled; the instance checks
    the configuration against its own session). ``backend_config``: the server's
    ``--backend-config`` entries as (backend, setting, value)."""
    import_onnxruntime()  # fails first, with the extra to install
    if config.get("model_transaction_policy", {}).get("decoupled"):
        # One run gives one response per request: Triton's backend refuses it too.
        raise OnnxLoadError(
            f"model '{name}': the onnxruntime backend does not serve decoupled models"
        )
    pb = config_from_dict(config)
    if not pb.name:
        pb.name = name
    path = model_path(version_dir, pb.default_model_filename, name, version)
    auto = auto_complete
    if auto:
        inputs, outputs = signature(probe_session(path))
    else:
        inputs, outputs = [], []
    try:
        pb = (
            complete_onnx_config(
                pb,
                inputs,
                outputs,
                auto_complete=auto,
                default_max_batch_size=_default_max_batch_size(backend_config),
            )
            if auto
            else _with_backend(pb)
        )
    except ConfigError as exc:
        raise OnnxLoadError(exc.message) from None
    return functools.partial(OnnxModel, path, name), config_to_json(pb)


def _with_backend(pb: Any) -> Any:
    if not pb.backend:
        pb.backend = ONNXRUNTIME_BACKEND
    if not pb.platform:
        pb.platform = "onnxruntime_onnx"
    return pb


def _default_max_batch_size(backend_config: Iterable[Sequence[str]]) -> int:
    """``--backend-config=onnxruntime,default-max-batch-size=N``, else the global
    ``--backend-config=default-max-batch-size=N``, else 4 (as Triton)."""
    found: dict[str, str] = {}
    for backend, setting, value in backend_config:
        if backend in (ONNXRUNTIME_BACKEND, "") and setting == BACKEND_SETTING_MAX_BATCH:
            found[backend] = value
    if not found:
        return DEFAULT_MAX_BATCH_SIZE
    backend = ONNXRUNTIME_BACKEND if ONNXRUNTIME_BACKEND in found else ""
    value = found[backend]
    try:
        return int(value)
    except ValueError:
        flag = f"{backend}," if backend else ""
        raise OnnxLoadError(
            f"--backend-config={flag}{BACKEND_SETTING_MAX_BATCH} must be an integer, got '{value}'"
        ) from None
