"""Client shared memory through a real server and tritonclient's helpers: 2,000
registered regions add no descriptor to the server (they cost it two each before, and
about 2,000 of them exhausted a 4,096-descriptor limit), the region cap and the key prefix
answer 400, and the error never names the refused object."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import tritonclient.http as httpclient
import tritonclient.utils.shared_memory as shm
from tritonclient.utils import InferenceServerException

from tritium.testing import ServerProcess

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "model_repository"
PREFIX = f"shmlimit_{os.getpid()}_"
REGIONS = 2000


def _fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def test_many_regions_no_descriptors_caps_and_prefix() -> None:
    args = [f"--client-shm-max-regions={REGIONS}", f"--client-shm-key-prefix={PREFIX}"]
    mine = shm.create_shared_memory_region("mine", f"/{PREFIX}a", 4096)
    other = shm.create_shared_memory_region("other", f"/other_{PREFIX}", 4096)
    try:
        with ServerProcess([EXAMPLES], args) as server:
            client = httpclient.InferenceServerClient(server.http_url)
            try:
                before = _fds(server.proc.pid)
                for i in range(REGIONS):
                    client.register_system_shared_memory(f"r{i}", f"/{PREFIX}a", 4096)
                assert _fds(server.proc.pid) - before < 10
                with pytest.raises(InferenceServerException) as full:
                    client.register_system_shared_memory("one-more", f"/{PREFIX}a", 4096)
                assert full.value.status() == "400"
                assert "--client-shm-max-regions" in str(full.value)
                client.unregister_system_shared_memory()
                assert _fds(server.proc.pid) - before < 10
                with pytest.raises(InferenceServerException) as refused:
                    client.register_system_shared_memory("x", f"/other_{PREFIX}", 4096)
                assert refused.value.status() == "400"
                assert f"only accepts keys starting with '{PREFIX}'" in str(refused.value)
                assert f"/other_{PREFIX}" not in str(refused.value)
            finally:
                client.close()
    finally:
        shm.destroy_shared_memory_region(mine)
        shm.destroy_shared_memory_region(other)
