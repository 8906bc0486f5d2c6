"""GPU discovery from the driver's /proc and /dev entries (no GPU library needed)."""

from __future__ import annotations

from tritium.server.devices import gpu_count


def test_no_driver_means_no_gpu(tmp_path, monkeypatch):
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    assert gpu_count(tmp_path / "missing", tmp_path / "dev-missing") == 0


def test_counts_proc_entries_then_dev_nodes(tmp_path, monkeypatch):
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    proc = tmp_path / "gpus"
    (proc / "0000:01:00.0").mkdir(parents=True)
    (proc / "0000:02:00.0").mkdir()
    assert gpu_count(proc, tmp_path) == 2
    dev = tmp_path / "dev"
    dev.mkdir()
    for name in ("nvidia0", "nvidia1", "nvidia2", "nvidiactl", "nvidia-uvm"):
        (dev / name).touch()
    assert gpu_count(tmp_path / "none", dev) == 3


def test_cuda_visible_devices_narrows(tmp_path, monkeypatch):
    dev = tmp_path / "dev"
    dev.mkdir()
    for name in ("nvidia0", "nvidia1", "nvidia2"):
        (dev / name).touch()
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
    assert gpu_count(tmp_path / "none", dev) == 1
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    assert gpu_count(tmp_path / "none", dev) == 0
