"""What one instance's model is compiled with, read from the model configuration's
parameters the way Triton's openvino backend reads them.

Parameters (``parameters { key: ... value: { string_value: ... } }``): ``TARGET_DEVICE``
(default ``CPU``), ``PERFORMANCE_HINT`` (``LATENCY``, ``THROUGHPUT``,
``CUMULATIVE_THROUGHPUT``), ``NUM_STREAMS``, ``INFERENCE_NUM_THREADS``,
``COMPILATION_NUM_THREADS``, ``INFERENCE_PRECISION_HINT`` (``f32``, ``bf16``, ``f16``)
and Triton's ``HINT_BF16`` (``YES`` asks for bf16).

Unlike OpenVINO's own defaults: on the CPU, inference runs in the model's precision
(``f32``) unless a hint asks for less — OpenVINO would otherwise pick bf16 on CPUs that
have it, which moves fp32 outputs by a few hundredths; and without a thread count the
instances of the model divide the cores among them, as the onnxruntime backend's do.

An instance with a device of its own (``KIND_GPU``, or ``tritium.device_ids``) compiles
for that device: a plain device name such as ``GPU`` becomes ``GPU.<id>``.

This module does not import openvino: it produces plain values, tested without it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tritium.backends.core_share import core_share
from tritium.config.instance_devices import indexed_device, parameter_strings

DEFAULT_DEVICE = "CPU"
_HINTS = ("LATENCY", "THROUGHPUT", "CUMULATIVE_THROUGHPUT")
_PRECISIONS = ("f32", "bf16", "f16")
# Integer properties passed through as they are.
_COUNTS = ("NUM_STREAMS", "INFERENCE_NUM_THREADS", "COMPILATION_NUM_THREADS")


class CompileSettingsError(ValueError):
    """A parameter that cannot be honoured; the text names it."""


@dataclass(frozen=True, slots=True)
class CompileSettings:
    device: str
    properties: tuple[tuple[str, str], ...]


def compile_settings(
    config: dict[str, Any],
    *,
    device_index: int | None = None,
    cores: int | None = None,
) -> CompileSettings:
    """The device and properties for one instance of ``config`` (completed, as JSON);
    ``device_index``: the instance's own device as its worker sees it, None for none."""
    params = parameter_strings(config)
    device = params.get("TARGET_DEVICE", "").strip() or DEFAULT_DEVICE
    device = indexed_device(device, device_index)
    properties: dict[str, str] = {}
    hint = params.get("PERFORMANCE_HINT", "").strip().upper()
    if hint:
        if hint not in _HINTS:
            raise CompileSettingsError(
                f"parameter 'PERFORMANCE_HINT' must be one of {', '.join(_HINTS)}, got '{hint}'"
            )
        properties["PERFORMANCE_HINT"] = hint
    for key in _COUNTS:
        text = params.get(key, "").strip()
        if text:
            if not (text.isdigit() or (key == "NUM_STREAMS" and text.upper() == "AUTO")):
                raise CompileSettingsError(
                    f"parameter '{key}' must be a non-negative integer, got '{text}'"
                )
            properties[key] = text.upper()
    on_cpu = device.upper().startswith("CPU")
    if on_cpu and "INFERENCE_NUM_THREADS" not in properties:
        properties["INFERENCE_NUM_THREADS"] = str(core_share(config, cores))
    precision = params.get("INFERENCE_PRECISION_HINT", "").strip().lower()
    if not precision and params.get("HINT_BF16", "").strip().upper() in ("YES", "TRUE", "1"):
        precision = "bf16"
    if precision:
        if precision not in _PRECISIONS:
            raise CompileSettingsError(
                "parameter 'INFERENCE_PRECISION_HINT' must be one of "
                f"{', '.join(_PRECISIONS)}, got '{precision}'"
            )
        properties["INFERENCE_PRECISION_HINT"] = precision
    elif on_cpu:
        properties["INFERENCE_PRECISION_HINT"] = "f32"
    return CompileSettings(device, tuple(sorted(properties.items())))
