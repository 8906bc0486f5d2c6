"""GPU gauges: the NVML sampler (driven by the stand-in NVML in tests/fakes/nvml, since
this machine has no GPU), ``CUDA_VISIBLE_DEVICES``, Triton's families on the page, and no
gauges and no error without the package, the driver or a GPU."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tritium.frontends.metrics.collect import gpu_families
from tritium.frontends.metrics.exposition import render
from tritium.frontends.metrics.gpu import GpuSample, GpuSampler, visible

FAKE_NVML = Path(__file__).resolve().parents[1] / "fakes" / "nvml" / "pynvml.py"
UUID_A = "GPU-11111111-2222-3333-4444-555555555555"
UUID_B = "GPU-66666666-7777-8888-9999-000000000000"


@pytest.fixture
def nvml() -> ModuleType:
    """A fresh copy of the stand-in for each test."""
    spec = importlib.util.spec_from_file_location("pynvml_standin", FAKE_NVML)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_samples_in_tritons_units(nvml: ModuleType, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    sampler = GpuSampler(nvml)
    assert sampler.latest == ()
    assert sampler.start()
    first = sampler.sample()
    assert first[0] == GpuSample(
        UUID_A,
        utilization=0.37,
        memory_total_bytes=80 * 2**30,
        memory_used_bytes=2**30,
        power_usage_watts=123.456,
        power_limit_watts=700.0,
        energy_joules=0.0,  # since the server started
    )
    # A reading the GPU does not support reports 0, the others still come through.
    assert first[1] == GpuSample(UUID_B, 0.0, 16 * 2**30, 0, 0.0, 250.0, 0.0)
    second = sampler.sample()
    assert second[0].energy_joules == 5.0 and second[1].energy_joules == 0.0
    assert sampler.sample()[0].energy_joules == 10.0
    sampler.close()
    sampler.close()
    assert nvml.calls == {"init": 1, "shutdown": 1}


def test_cuda_visible_devices(nvml: ModuleType, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
    sampler = GpuSampler(nvml)
    assert sampler.start()
    assert [s.uuid for s in sampler.sample()] == [UUID_B]
    assert visible(0, UUID_A, None)
    assert visible(0, UUID_A, "GPU-1111") and not visible(1, UUID_B, "GPU-1111")
    assert not visible(0, UUID_A, "")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    hidden = GpuSampler(nvml)
    assert not hidden.start() and hidden.sample() == ()
    assert nvml.calls == {"init": 2, "shutdown": 1}  # nothing to read: NVML let go at once


def test_no_driver_or_no_gpu_means_no_gauges(nvml: ModuleType) -> None:
    nvml.INIT_ERROR = "NVML Shared Library Not Found"
    sampler = GpuSampler(nvml)
    assert not sampler.start()
    assert sampler.sample() == () and gpu_families(sampler.latest) == []
    sampler.close()
    assert nvml.calls["shutdown"] == 0
    nvml.INIT_ERROR = None
    nvml.DEVICES.clear()
    assert not GpuSampler(nvml).start()


def test_without_the_package(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "pynvml", None)  # as if nvidia-ml-py were not installed
    sampler = GpuSampler()
    assert not sampler.start() and sampler.sample() == ()


def test_real_nvml_without_a_gpu_is_quiet() -> None:
    import pynvml  # nvidia-ml-py, in the test extra

    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError:
        pass
    else:
        pynvml.nvmlShutdown()
        pytest.skip("this machine has an NVIDIA driver")
    assert not GpuSampler().start()


def test_families_have_tritons_names_types_and_labels() -> None:
    samples = (
        GpuSample(UUID_A, 0.37, 100, 10, 123.456, 700.0, 5.0),
        GpuSample(UUID_B, 0.0, 200, 0, 0.0, 250.0, 0.0),
    )
    text = render(gpu_families(samples)).decode()
    families = {f.name: f for f in text_string_to_metric_families(text)}
    assert {name: (f.type, f.documentation) for name, f in families.items()} == {
        "nv_gpu_utilization": ("gauge", "GPU utilization rate [0.0 - 1.0)"),
        "nv_gpu_memory_total_bytes": ("gauge", "GPU total memory, in bytes"),
        "nv_gpu_memory_used_bytes": ("gauge", "GPU used memory, in bytes"),
        "nv_gpu_power_usage": ("gauge", "GPU power usage in watts"),
        "nv_gpu_power_limit": ("gauge", "GPU power management limit in watts"),
        "nv_energy_consumption": (
            "counter",
            "GPU energy consumption in joules since the Triton Server started",
        ),
    }
    assert 'nv_gpu_power_usage{gpu_uuid="' + UUID_A + '"} 123.456' in text
    assert 'nv_energy_consumption{gpu_uuid="' + UUID_A + '"} 5' in text
    values = {
        (s.name, s.labels["gpu_uuid"]): s.value for f in families.values() for s in f.samples
    }
    assert values[("nv_gpu_memory_total_bytes", UUID_B)] == 200
    assert values[("nv_gpu_utilization", UUID_A)] == 0.37
