"""GPU gauges read through NVML (the optional ``nvidia-ml-py`` package, ``pynvml``).

Triton reads the same numbers through DCGM: utilisation (0.0 – 1.0), total and used
memory in bytes, power usage and the enforced power limit in watts, and the energy used
since the server started in joules; each GPU is labelled ``gpu_uuid``. Only the GPUs that
``CUDA_VISIBLE_DEVICES`` leaves visible are reported. Without the package, without a
driver or without a GPU the sampler finds no GPU and the page has no GPU families; a
reading that fails reports 0, as Triton does. NVML calls can take milliseconds, so the
metrics server calls ``start`` and ``sample`` from a worker thread, never on the loop.
"""

from __future__ import annotations

import importlib
import logging
import os
from dataclasses import dataclass
from types import ModuleType
from typing import Any

log = logging.getLogger("tritium.metrics")


@dataclass(frozen=True, slots=True)
class GpuSample:
    uuid: str
    utilization: float = 0.0
    memory_total_bytes: int = 0
    memory_used_bytes: int = 0
    power_usage_watts: float = 0.0
    power_limit_watts: float = 0.0
    energy_joules: float = 0.0


def _import_nvml() -> ModuleType | None:
    try:
        return importlib.import_module("pynvml")
    except ImportError:
        return None


def visible(index: int, uuid: str, cuda_visible: str | None) -> bool:
    """Whether ``CUDA_VISIBLE_DEVICES`` (None: unset, all visible) lets this GPU through;
    entries are indices or (prefixes of) UUIDs, as CUDA reads them."""
    if cuda_visible is None:
        return True
    for entry in cuda_visible.split(","):
        entry = entry.strip()
        if entry.isdigit() and int(entry) == index:
            return True
        if entry.startswith("GPU-") and uuid.startswith(entry):
            return True
    return False


class GpuSampler:
    """``start()`` once, then ``sample()`` every ``--metrics-interval-ms``; ``latest``
    holds one ``GpuSample`` per GPU (empty: no GPU gauges)."""

    def __init__(self, nvml: ModuleType | None = None) -> None:
        self._nvml = nvml
        self._devices: list[tuple[Any, str]] = []  # (NVML handle, uuid)
        self._first_energy_mj: dict[str, int] = {}
        self._started = False
        self.latest: tuple[GpuSample, ...] = ()

    def start(self) -> bool:
        """Initialise NVML and find the visible GPUs; False when there are none."""
        nvml = self._nvml if self._nvml is not None else _import_nvml()
        if nvml is None:
            log.debug("GPU metrics not available: the nvidia-ml-py package is not installed")
            return False
        self._nvml = nvml
        try:
            nvml.nvmlInit()
        except nvml.NVMLError as exc:
            log.debug("GPU metrics not available: %s", exc)
            return False
        self._started = True
        cuda_visible = os.environ.get("CUDA_VISIBLE_DEVICES")
        try:
            for index in range(nvml.nvmlDeviceGetCount()):
                handle = nvml.nvmlDeviceGetHandleByIndex(index)
                uuid = nvml.nvmlDeviceGetUUID(handle)
                uuid = uuid.decode() if isinstance(uuid, bytes) else str(uuid)
                if visible(index, uuid, cuda_visible):
                    self._devices.append((handle, uuid))
        except nvml.NVMLError as exc:
            log.warning("GPU metrics will not be available: %s", exc)
            self._devices = []
        if not self._devices:
            self.close()
            return False
        for _, uuid in self._devices:
            log.info("Collecting metrics for GPU %s", uuid)
        return True

    def sample(self) -> tuple[GpuSample, ...]:
        self.latest = tuple(self._read(handle, uuid) for handle, uuid in self._devices)
        return self.latest

    def _read(self, handle: Any, uuid: str) -> GpuSample:
        nvml = self._nvml
        assert nvml is not None

        def read(call: str) -> Any:
            try:
                return getattr(nvml, call)(handle)
            except nvml.NVMLError:
                return None

        rates = read("nvmlDeviceGetUtilizationRates")
        memory = read("nvmlDeviceGetMemoryInfo")
        power_mw = read("nvmlDeviceGetPowerUsage")
        limit_mw = read("nvmlDeviceGetEnforcedPowerLimit")
        energy_mj = read("nvmlDeviceGetTotalEnergyConsumption")
        energy_j = 0.0
        if energy_mj is not None:
            first = self._first_energy_mj.setdefault(uuid, energy_mj)
            energy_j = (energy_mj - first) / 1000
        return GpuSample(
            uuid,
            utilization=rates.gpu / 100 if rates is not None else 0.0,
            memory_total_bytes=int(memory.total) if memory is not None else 0,
            memory_used_bytes=int(memory.used) if memory is not None else 0,
            power_usage_watts=power_mw / 1000 if power_mw is not None else 0.0,
            power_limit_watts=limit_mw / 1000 if limit_mw is not None else 0.0,
            energy_joules=energy_j,
        )

    def close(self) -> None:
        if self._started and self._nvml is not None:
            self._started = False
            try:
                self._nvml.nvmlShutdown()
            except self._nvml.NVMLError:
                pass
