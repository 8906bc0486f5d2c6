"""Open an OpenVINO IR model: find ``model.xml`` (its weights in ``model.bin`` beside it),
read its signature, compile it for one instance from :class:`CompileSettings`.

openvino is imported here only, and only when a model of this backend loads; without it
the model fails with the extra to install.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tritium.backends.openvino.compile_settings import CompileSettings
from tritium.config.onnx_complete import GraphTensor
from tritium.config.openvino_types import config_type_of_openvino

NOT_INSTALLED = "backend 'openvino' is not installed: pip install 'tritium[openvino]'"
OPENVINO_BACKEND = "openvino"
MODEL_FILENAME = "model.xml"


class OpenVinoLoadError(Exception):
    """The model cannot be opened or compiled; the text says why (no server paths)."""

    code = "INVALID_ARG"


def import_openvino() -> Any:
    try:
        import openvino
    except ImportError:
        raise OpenVinoLoadError(NOT_INSTALLED) from None
    return openvino


def model_path(version_dir: Path, filename: str, model: str, version: str) -> Path:
    path = version_dir / (filename or MODEL_FILENAME)
    if not path.is_file():
        raise OpenVinoLoadError(
            f"unable to find '{filename or MODEL_FILENAME}' in version {version} of model '{model}'"
        )
    return path


def read_model(path: Path) -> Any:
    """The model (uncompiled) from its ``.xml`` and the ``.bin`` of the same name."""
    ov = import_openvino()
    try:
        return ov.Core().read_model(str(path))
    except Exception as exc:  # noqa: BLE001 - openvino raises its own exception types
        text = str(exc).replace(str(path.parent), "<model folder>")
        raise OpenVinoLoadError(f"openvino could not read the model: {text}") from None


def signature(model: Any) -> tuple[list[GraphTensor], list[GraphTensor]]:
    """The model's inputs and outputs (a compiled model's too)."""

    def tensor(port: Any) -> GraphTensor:
        shape = tuple(d.get_length() if d.is_static else -1 for d in port.get_partial_shape())
        kind = port.get_element_type().get_type_name()
        return GraphTensor(port.get_any_name(), config_type_of_openvino(kind), shape, kind)

    return [tensor(p) for p in model.inputs], [tensor(p) for p in model.outputs]


def compile_model(path: Path, settings: CompileSettings, model: str) -> Any:
    """One instance's compiled model."""
    ov = import_openvino()
    core = ov.Core()
    try:
        return core.compile_model(str(path), settings.device, dict(settings.properties))
    except Exception as exc:  # noqa: BLE001 - openvino raises its own exception types
        text = str(exc).replace(str(path.parent), "<model folder>").strip().splitlines()
        reason = text[0] if text else type(exc).__name__
        raise OpenVinoLoadError(
            f"model '{model}': openvino could not compile it for device '{settings.device}' "
            f"(available: {', '.join(core.available_devices)}): {reason}"
        ) from None
