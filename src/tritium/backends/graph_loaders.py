"""Which graph backend (onnxruntime, openvino) serves a model, by Triton's rules
(``backend``, ``platform``, ``default_model_filename``, the files in the version folder),
and its loading module, imported only when such a model loads."""

from __future__ import annotations

import os
from pathlib import Path
from types import ModuleType
from typing import Any

from tritium.config.backends import detect_backend


def graph_loader(config: dict[str, Any], version_dir: Path) -> ModuleType | None:
    """The loading module for the model (``config`` so far, its version folder), or None
    when no graph backend serves it."""
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
    if backend == "onnxruntime":
        from tritium.backends.onnxruntime import loading as onnx_loading

        return onnx_loading
    if backend == "openvino":
        from tritium.backends.openvino import loading as openvino_loading

        return openvino_loading
    return None
