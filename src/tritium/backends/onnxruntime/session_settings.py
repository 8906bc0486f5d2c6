"""What one instance's ``InferenceSession`` is built with, read from the model configuration
the way Triton's onnxruntime backend reads it.

Parameters (``parameters { key: ... value: { string_value: ... } }``):
``intra_op_thread_count``, ``inter_op_thread_count``, ``execution_mode`` (0 sequential,
1 parallel), ``enable_mem_arena``, ``enable_mem_pattern``,
``memory.enable_memory_arena_shrinkage`` (a run option) and any ``session.*`` key (an ORT
session configuration entry, passed through). ``optimization { graph { level } }``: -1
basic, 1 extended, anything else all optimizations (ORT's default).
``optimization { execution_accelerators { cpu_execution_accelerator { name: "openvino" } } }``
asks for the OpenVINO execution provider, with the accelerator's parameters as provider
options.

Unlike Triton: without a thread count, the instances of the model divide the cores among
them (ORT's default gives every instance all cores, and instances then fight for them);
and an accelerator that is asked for but not installed fails the load instead of running
silently on the CPU.

This module does not import onnxruntime: it produces plain values that
:mod:`.session` applies, so it is tested without it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tritium.backends.core_share import core_share, instance_count, usable_cores
from tritium.config.instance_devices import indexed_device

__all__ = [
    "SessionSettings",
    "SettingsError",
    "check_providers",
    "instance_count",
    "session_settings",
    "usable_cores",
]

# Triton's accelerator names -> ONNX Runtime execution provider.
ACCELERATOR_PROVIDERS: dict[str, str] = {
    "openvino": "OpenVINOExecutionProvider",
    "tensorrt": "TensorrtExecutionProvider",
    "cuda": "CUDAExecutionProvider",
}
# Which extra installs each provider.
# The extra's package (onnxruntime-openvino) replaces onnxruntime: both install the same
# `onnxruntime` module, so only one of the two may be installed.
PROVIDER_EXTRAS: dict[str, str] = {
    "OpenVINOExecutionProvider": "tritium[onnxruntime-openvino]",
}
_EXTRA_NOTES: dict[str, str] = {
    "OpenVINOExecutionProvider": " (onnxruntime-openvino, in place of onnxruntime)",
}
# optimization.graph.level -> ORT's GraphOptimizationLevel member name.
_GRAPH_LEVELS = {-1: "ORT_ENABLE_BASIC", 1: "ORT_ENABLE_EXTENDED"}
_DEFAULT_GRAPH_LEVEL = "ORT_ENABLE_ALL"


class SettingsError(ValueError):
    """A parameter or accelerator that cannot be honoured; the text names it."""


@dataclass(frozen=True, slots=True)
class SessionSettings:
    intra_op_threads: int
    inter_op_threads: int
    parallel: bool = False
    mem_arena: bool = True
    mem_pattern: bool = True
    graph_level: str = _DEFAULT_GRAPH_LEVEL
    session_entries: tuple[tuple[str, str], ...] = ()
    run_entries: tuple[tuple[str, str], ...] = ()
    # (provider name, provider options), most preferred first; CPU is always last.
    providers: tuple[tuple[str, dict[str, str]], ...] = field(default=())


def session_settings(
    config: dict[str, Any],
    *,
    kind: str = "CPU",
    device_id: int = 0,
    cores: int | None = None,
    own_device: int | None = None,
) -> SessionSettings:
    """The settings for one instance of ``config`` (the completed configuration as JSON)
    of instance ``kind`` ("CPU"/"GPU"/"MODEL") on ``device_id``. ``own_device``: the
    index of the instance's own device (``KIND_GPU`` or ``tritium.device_ids``), None
    without one; the OpenVINO provider's plain ``device_type`` (``GPU``) gets it."""
    params = {
        key: str(value.get("string_value", ""))
        for key, value in config.get("parameters", {}).items()
    }
    share = core_share(config, cores)
    parallel = _int(params, "execution_mode", 0) == 1
    intra = _int(params, "intra_op_thread_count", 0) or share
    # Sequential execution never uses the inter-op pool; a parallel one gets a share too.
    inter = _int(params, "inter_op_thread_count", 0) or (share if parallel else 1)
    level = _graph_level(config)
    session_entries = tuple(
        (key, value) for key, value in sorted(params.items()) if key.startswith("session.")
    )
    run_entries: tuple[tuple[str, str], ...] = ()
    if "memory.enable_memory_arena_shrinkage" in params:
        run_entries = (
            (
                "memory.enable_memory_arena_shrinkage",
                params["memory.enable_memory_arena_shrinkage"],
            ),
        )
    return SessionSettings(
        intra_op_threads=intra,
        inter_op_threads=inter,
        parallel=parallel,
        mem_arena=_flag(params, "enable_mem_arena", True),
        mem_pattern=_flag(params, "enable_mem_pattern", True),
        graph_level=level,
        session_entries=session_entries,
        run_entries=run_entries,
        providers=_providers(config, kind, device_id, own_device),
    )


def check_providers(settings: SessionSettings, available: list[str], model: str) -> None:
    """Raise SettingsError when a provider the configuration asks for is not installed."""
    for provider, _ in settings.providers:
        if provider not in available:
            extra = PROVIDER_EXTRAS.get(provider)
            hint = f": pip install '{extra}'{_EXTRA_NOTES.get(provider, '')}" if extra else ""
            raise SettingsError(
                f"model '{model}' asks for execution provider {provider}, which this "
                f"onnxruntime does not have (it has {', '.join(available)}){hint}"
            )


def _int(params: dict[str, str], key: str, default: int) -> int:
    text = params.get(key, "")
    if text == "":
        return default
    try:
        value = int(text)
    except ValueError:
        raise SettingsError(f"parameter '{key}' must be an integer, got '{text}'") from None
    if value < 0:
        raise SettingsError(f"parameter '{key}' must not be negative, got '{text}'")
    return value


def _flag(params: dict[str, str], key: str, default: bool) -> bool:
    text = params.get(key, "").strip().lower()
    if text == "":
        return default
    if text in ("1", "true", "on", "yes"):
        return True
    if text in ("0", "false", "off", "no"):
        return False
    raise SettingsError(f"parameter '{key}' must be a boolean, got '{params[key]}'")


def _graph_level(config: dict[str, Any]) -> str:
    level = config.get("optimization", {}).get("graph", {}).get("level", 0)
    return _GRAPH_LEVELS.get(int(level), _DEFAULT_GRAPH_LEVEL)


def _providers(
    config: dict[str, Any], kind: str, device_id: int, own_device: int | None = None
) -> tuple[tuple[str, dict[str, str]], ...]:
    accelerators = config.get("optimization", {}).get("execution_accelerators", {})
    chosen: list[tuple[str, dict[str, str]]] = []
    groups = ["cpu_execution_accelerator"]
    if kind == "GPU":
        groups.insert(0, "gpu_execution_accelerator")
    for group in groups:
        for accelerator in accelerators.get(group, ()):
            name = str(accelerator.get("name", ""))
            provider = ACCELERATOR_PROVIDERS.get(name)
            if provider is None:
                # Triton's words for an accelerator it does not know.
                raise SettingsError(f"unknown Execution Accelerator '{name}' is requested")
            options = {str(k): str(v) for k, v in accelerator.get("parameters", {}).items()}
            if provider in ("CUDAExecutionProvider", "TensorrtExecutionProvider"):
                options.setdefault("device_id", str(device_id))
            elif provider == "OpenVINOExecutionProvider" and "device_type" in options:
                options["device_type"] = indexed_device(options["device_type"], own_device)
            chosen.append((provider, options))
    if kind == "GPU" and not any(p == "CUDAExecutionProvider" for p, _ in chosen):
        chosen.append(("CUDAExecutionProvider", {"device_id": str(device_id)}))
    return tuple(chosen)
