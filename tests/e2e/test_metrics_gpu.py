"""GPU gauges on ``/metrics`` of a real server. This machine has no GPU, so the server
gets the stand-in NVML library of tests/fakes/nvml on its path (only the hardware library
is replaced); ``--allow-gpu-metrics=false`` turns the gauges off."""

from __future__ import annotations

import os
import time
import urllib.request
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from tritium.testing import ServerProcess

from .conftest import EXAMPLE_MODELS

FAKE_NVML = Path(__file__).resolve().parents[1] / "fakes" / "nvml"
UUID_A = "GPU-11111111-2222-3333-4444-555555555555"
UUID_B = "GPU-66666666-7777-8888-9999-000000000000"
GPU_FAMILIES = {
    "nv_gpu_utilization",
    "nv_gpu_memory_total_bytes",
    "nv_gpu_memory_used_bytes",
    "nv_gpu_power_usage",
    "nv_gpu_power_limit",
    "nv_energy_consumption",
}


def launch(*args: str) -> ServerProcess:
    env = {**os.environ, "PYTHONPATH": str(FAKE_NVML)}
    env.pop("CUDA_VISIBLE_DEVICES", None)
    base = ["--model-control-mode=explicit", "--metrics-interval-ms=50", *args]
    return ServerProcess([EXAMPLE_MODELS], base, env=env, metrics=True)


def scrape(server: ServerProcess) -> dict[str, dict[str, float]]:
    """{family: {gpu_uuid: value}} for the GPU families on the page."""
    with urllib.request.urlopen(server.metrics_url, timeout=10) as reply:
        text = reply.read().decode()
    out: dict[str, dict[str, float]] = {}
    for family in text_string_to_metric_families(text):
        if family.name in GPU_FAMILIES:
            out[family.name] = {s.labels["gpu_uuid"]: s.value for s in family.samples}
    return out


def test_gpu_gauges_read_through_nvml() -> None:
    with launch() as server:
        assert server.wait_for_log(f"Collecting metrics for GPU {UUID_A}")
        first = scrape(server)
        assert set(first) == GPU_FAMILIES
        assert first["nv_gpu_utilization"] == {UUID_A: 0.37, UUID_B: 0.0}
        assert first["nv_gpu_memory_total_bytes"] == {UUID_A: 80 * 2**30, UUID_B: 16 * 2**30}
        assert first["nv_gpu_memory_used_bytes"] == {UUID_A: 2**30, UUID_B: 0}
        assert first["nv_gpu_power_usage"] == {UUID_A: 123.456, UUID_B: 0.0}
        assert first["nv_gpu_power_limit"] == {UUID_A: 700.0, UUID_B: 250.0}
        # The energy counter grows with each poll (5 J per read of the stand-in).
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            energy = scrape(server)["nv_energy_consumption"]
            if energy[UUID_A] > first["nv_energy_consumption"][UUID_A]:
                break
            time.sleep(0.05)
        assert energy[UUID_A] > first["nv_energy_consumption"][UUID_A]
        assert energy[UUID_A] % 5 == 0 and energy[UUID_B] == 0


def test_allow_gpu_metrics_false() -> None:
    with launch("--allow-gpu-metrics=false") as server:
        assert scrape(server) == {}
        assert "Collecting metrics for GPU" not in server.log
