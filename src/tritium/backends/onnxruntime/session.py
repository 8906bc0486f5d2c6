"""Open an ONNX model with onnxruntime: find its file, read its graph's signature, build
one instance's ``InferenceSession`` from :class:`SessionSettings`.

onnxruntime is imported here only, and only when a model of this backend loads; without
it the model fails with the extra to install.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tritium.backends.onnxruntime.session_settings import (
    SessionSettings,
    SettingsError,
    check_providers,
)
from tritium.config.onnx_complete import ONNX_MODEL_FILENAME, GraphTensor
from tritium.config.onnx_types import config_type_of_ort

NOT_INSTALLED = "backend 'onnxruntime' is not installed: pip install 'tritium[onnxruntime]'"


class OnnxLoadError(Exception):
    """The model cannot be opened; the text says why (no paths outside the model)."""

    code = "INVALID_ARG"


def import_onnxruntime() -> Any:
    try:
        import onnxruntime
    except ImportError:
        raise OnnxLoadError(NOT_INSTALLED) from None
    return onnxruntime


def model_path(version_dir: Path, filename: str, model: str, version: str) -> Path:
    """The file to open: ``filename`` in the version folder, or, when that is a folder
    (Triton's directory form, kept beside external weights), ``model.onnx`` inside it."""
    path = version_dir / (filename or ONNX_MODEL_FILENAME)
    if path.is_dir():
        path = path / ONNX_MODEL_FILENAME
    if not path.is_file():
        raise OnnxLoadError(
            f"unable to find '{filename or ONNX_MODEL_FILENAME}' in version {version} "
            f"of model '{model}'"
        )
    return path


def signature(session: Any) -> tuple[list[GraphTensor], list[GraphTensor]]:
    """The graph's inputs (overridable initializers among them, as optional inputs) and
    outputs."""

    def tensor(arg: Any, optional: bool = False) -> GraphTensor:
        shape = tuple(d if isinstance(d, int) and d >= 0 else -1 for d in (arg.shape or ()))
        kind = str(arg.type)
        return GraphTensor(
            arg.name,
            config_type_of_ort(kind),
            shape,
            kind,
            optional or kind.startswith("optional("),
        )

    inputs = [tensor(a) for a in session.get_inputs()]
    inputs += [tensor(a, True) for a in session.get_overridable_initializers()]
    return inputs, [tensor(a) for a in session.get_outputs()]


def probe_session(path: Path) -> Any:
    """A light session for reading the signature at load (no graph optimization, one
    thread); each instance builds its own afterwards."""
    ort = import_onnxruntime()
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    return _open(ort, path, options, ["CPUExecutionProvider"])


def build_session(path: Path, settings: SessionSettings, model: str) -> tuple[Any, Any]:
    """One instance's session and the run options its runs use."""
    ort = import_onnxruntime()
    try:
        check_providers(settings, ort.get_available_providers(), model)
    except SettingsError as exc:
        raise OnnxLoadError(str(exc)) from None
    options = ort.SessionOptions()
    options.intra_op_num_threads = settings.intra_op_threads
    options.inter_op_num_threads = settings.inter_op_threads
    options.execution_mode = (
        ort.ExecutionMode.ORT_PARALLEL if settings.parallel else ort.ExecutionMode.ORT_SEQUENTIAL
    )
    options.enable_cpu_mem_arena = settings.mem_arena
    options.enable_mem_pattern = settings.mem_pattern
    options.graph_optimization_level = getattr(ort.GraphOptimizationLevel, settings.graph_level)
    for key, value in settings.session_entries:
        options.add_session_config_entry(key, value)
    providers: list[Any] = [(name, opts) for name, opts in settings.providers]
    providers.append("CPUExecutionProvider")
    session = _open(ort, path, options, providers)
    asked = [name for name, _ in settings.providers]
    missing = [name for name in asked if name not in session.get_providers()]
    if missing:
        # ORT falls back to the CPU quietly when a provider fails to start; refuse instead.
        raise OnnxLoadError(
            f"model '{model}': execution provider {', '.join(missing)} could not be started "
            "(onnxruntime would have run the model on the CPU instead)"
        )
    run_options = ort.RunOptions()
    for key, value in settings.run_entries:
        run_options.add_run_config_entry(key, value)
    return session, run_options


def _open(ort: Any, path: Path, options: Any, providers: list[Any]) -> Any:
    try:
        return ort.InferenceSession(str(path), sess_options=options, providers=providers)
    except Exception as exc:  # noqa: BLE001 - onnxruntime raises its own exception types
        text = str(exc).replace(str(path.parent), "<model folder>")
        raise OnnxLoadError(f"onnxruntime could not open the model: {text}") from None
