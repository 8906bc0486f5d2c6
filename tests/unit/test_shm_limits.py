"""Client shared memory costs no file descriptor per region, and its caps and key prefix
refuse registrations with a clear 400 (Triton 2.51: 3,000 regions cost one descriptor;
it has no caps and opens any object the server may open)."""

from __future__ import annotations

import os

import numpy as np
import pytest

from tritium.core.errors import InvalidArgument
from tritium.service.shared_memory.registry import SharedMemoryRegistry, ShmLimits

REGION = 4096


def _fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def _objects(shm_dir, count: int, size: int = REGION) -> list[str]:
    keys = []
    for i in range(count):
        key = f"obj{i}"
        with open(shm_dir / key, "wb") as f:
            f.write(bytes(size))
        keys.append(key)
    return keys


def test_three_thousand_regions_hold_no_descriptor(tmp_path):
    keys = _objects(tmp_path, 3000)
    registry = SharedMemoryRegistry(str(tmp_path), ShmLimits(max_regions=5000))
    before = _fds()
    for i, key in enumerate(keys):
        registry.register(f"r{i}", key, 0, REGION)
    assert _fds() - before <= 1
    # Still readable and writable, and checked against truncation without a descriptor.
    lease = registry.lease()
    view = registry.acquire(lease, "r7").view(0, 8)
    view[:] = b"abcdefgh"
    assert (tmp_path / keys[7]).read_bytes()[:8] == b"abcdefgh"
    os.truncate(tmp_path / keys[8], 10)
    with pytest.raises(InvalidArgument, match="truncated"):
        registry.acquire(lease, "r8").view(0, 8)
    lease.release()
    registry.unregister_all()
    assert _fds() - before <= 1


def test_region_cap_is_a_clear_400_until_one_is_unregistered(tmp_path):
    keys = _objects(tmp_path, 3)
    registry = SharedMemoryRegistry(str(tmp_path), ShmLimits(max_regions=2))
    registry.register("a", keys[0], 0, REGION)
    registry.register("b", keys[1], 0, REGION)
    with pytest.raises(InvalidArgument, match=r"already holds 2 regions.*--client-shm-max-regions"):
        registry.register("c", keys[2], 0, REGION)
    registry.unregister("a")
    registry.register("c", keys[2], 0, REGION)


def test_byte_cap_counts_every_registered_region(tmp_path):
    keys = _objects(tmp_path, 3)
    registry = SharedMemoryRegistry(str(tmp_path), ShmLimits(max_bytes=2 * REGION))
    registry.register("a", keys[0], 0, REGION)
    registry.register("b", keys[1], 0, REGION)
    with pytest.raises(InvalidArgument, match=r"--client-shm-max-bytes"):
        registry.register("c", keys[2], 0, 1)
    registry.unregister_all()
    registry.register("c", keys[2], 0, REGION)


def test_key_prefix_refuses_other_objects_without_naming_them(tmp_path):
    _objects(tmp_path, 1)
    (tmp_path / "client_x").write_bytes(bytes(REGION))
    registry = SharedMemoryRegistry(str(tmp_path), ShmLimits(key_prefix="client_"))
    with pytest.raises(InvalidArgument) as refused:
        registry.register("a", "/obj0", 0, REGION)
    assert "only accepts keys starting with 'client_'" in refused.value.message
    assert "obj0" not in refused.value.message
    registry.register("b", "/client_x", 0, REGION)


def test_the_servers_own_prefix_is_refused_whatever_the_setting(tmp_path):
    (tmp_path / "tritium-arena").write_bytes(bytes(REGION))
    registry = SharedMemoryRegistry(str(tmp_path), ShmLimits(key_prefix="trit"))
    with pytest.raises(InvalidArgument, match="reserved for the server"):
        registry.register("a", "/tritium-arena", 0, REGION)


def test_a_view_outlives_unregistering_and_the_pages_go_with_it(tmp_path):
    (tmp_path / "obj").write_bytes(bytes(range(256)) * 16)
    registry = SharedMemoryRegistry(str(tmp_path))
    registry.register("a", "obj", 0, REGION)
    lease = registry.lease()
    array = np.frombuffer(registry.acquire(lease, "a").view(0, 16), np.uint8)
    lease.release()
    registry.unregister("a")

    def mapped() -> bool:
        with open("/proc/self/maps") as f:
            return any(str(tmp_path / "obj") in line for line in f)

    assert mapped() and array[:4].tolist() == [0, 1, 2, 3]
    del array
    assert not mapped()
