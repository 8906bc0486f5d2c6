"""System shared memory over gRPC (every transport) with tritonclient's real helpers.

Matches Triton 2.51: status is a map keyed by region name; an output written to shared
memory keeps an empty ``raw_output_contents`` entry so the other outputs' indices hold;
unknown regions are NOT_FOUND, bounds errors INVALID_ARGUMENT, an output too large for
its region INTERNAL; CUDA registration is UNIMPLEMENTED on a server without CUDA.
"""

from __future__ import annotations

import os
import threading
import uuid
from pathlib import Path

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.utils.shared_memory as shm
from tritonclient.utils import InferenceServerException

KEY_PREFIX = f"shmtest_grpc_{os.getpid()}_"


@pytest.fixture(scope="module")
def server(grpc_launch):
    with grpc_launch(["--load-model=shm_gate"]) as proc:
        yield proc


@pytest.fixture
def client(server):
    c = grpcclient.InferenceServerClient(server.grpc_url)
    yield c
    c.unregister_system_shared_memory()
    c.close()


@pytest.fixture
def regions():
    made: list = []

    def make(name: str, size: int):
        key = f"/{KEY_PREFIX}{name}_{uuid.uuid4().hex[:8]}"
        handle = shm.create_shared_memory_region(name, key, size)
        made.append(handle)
        return handle, key

    yield make
    for handle in made:
        shm.destroy_shared_memory_region(handle)


def error_of(call, *args, **kwargs) -> InferenceServerException:
    with pytest.raises(InferenceServerException) as info:
        call(*args, **kwargs)
    return info.value


def shm_inputs(region: str, offsets=(0, 16), sizes=(16, 16)):
    inputs = []
    for name, offset, size in zip(("INPUT0", "INPUT1"), offsets, sizes):
        inp = grpcclient.InferInput(name, [4], "FP32")
        inp.set_shared_memory(region, size, offset=offset)
        inputs.append(inp)
    return inputs


def assert_still_serving(client) -> None:
    a = np.arange(4, dtype=np.float32)
    inputs = [grpcclient.InferInput(n, [4], "FP32") for n in ("INPUT0", "INPUT1")]
    for inp in inputs:
        inp.set_data_from_numpy(a)
    assert np.array_equal(client.infer("add_sub", inputs).as_numpy("OUTPUT1"), a * 0)


def test_register_infer_status_unregister(client, regions):
    a = np.arange(4, dtype=np.float32)
    b = np.full(4, 3, dtype=np.float32)
    h_in, k_in = regions("in", 32)
    h_out, k_out = regions("out", 16)
    shm.set_shared_memory_region(h_in, [a, b])
    client.register_system_shared_memory("in", k_in, 32)
    client.register_system_shared_memory("out", k_out, 16)

    o0 = grpcclient.InferRequestedOutput("OUTPUT0")
    o0.set_shared_memory("out", 16)
    o1 = grpcclient.InferRequestedOutput("OUTPUT1")
    result = client.infer("add_sub", shm_inputs("in"), outputs=[o0, o1])
    response = result.get_response()
    assert [o.name for o in response.outputs] == ["OUTPUT0", "OUTPUT1"]
    assert list(response.raw_output_contents)[0] == b""  # Triton's placeholder
    assert np.array_equal(result.as_numpy("OUTPUT1"), a - b)
    assert np.array_equal(shm.get_contents_as_numpy(h_out, np.float32, [4]), a + b)

    status = client.get_system_shared_memory_status(as_json=True)["regions"]
    assert status["in"] == {"name": "in", "key": k_in, "byte_size": "32"}
    assert status["out"]["key"] == k_out
    client.unregister_system_shared_memory("in")
    assert set(client.get_system_shared_memory_status(as_json=True)["regions"]) == {"out"}
    client.unregister_system_shared_memory()
    assert not client.get_system_shared_memory_status().regions


def test_bytes_in_shared_memory(client, regions):
    from tritonclient.utils import serialize_byte_tensor, serialized_byte_size

    serialized = serialize_byte_tensor(np.array([b"grpc", b"shm"], dtype=np.object_))
    size = serialized_byte_size(serialized)
    h, key = regions("text", 128)
    shm.set_shared_memory_region(h, [serialized])
    client.register_system_shared_memory("text", key, 128)
    inp = grpcclient.InferInput("TEXT", [2], "BYTES")
    inp.set_shared_memory("text", size)
    upper = grpcclient.InferRequestedOutput("UPPER")
    upper.set_shared_memory("text", 64, offset=64)
    length = grpcclient.InferRequestedOutput("LENGTH")
    result = client.infer("string_upper", [inp], outputs=[upper, length])
    assert result.as_numpy("LENGTH").tolist() == [4, 3]
    got = shm.get_contents_as_numpy(h, np.object_, [2], offset=64)
    assert [bytes(x) for x in got] == [b"GRPC", b"SHM"]


def test_errors_keep_the_server_serving(client, regions):
    _, key = regions("err", 64)
    client.register_system_shared_memory("r", key, 64)
    err = error_of(client.register_system_shared_memory, "r", key, 64)
    assert err.status() == "StatusCode.ALREADY_EXISTS"
    assert err.message().endswith("shared memory region 'r' already in manager")
    err = error_of(client.register_system_shared_memory, "big", key, 128)
    assert err.status() == "StatusCode.INVALID_ARGUMENT"
    err = error_of(client.register_system_shared_memory, "ovf", key, 2, offset=2**64 - 1)
    assert err.status() == "StatusCode.INVALID_ARGUMENT"
    err = error_of(client.register_system_shared_memory, "res", "/tritium_arena", 8)
    assert err.status() == "StatusCode.INVALID_ARGUMENT" and "reserved" in err.message()
    err = error_of(client.get_system_shared_memory_status, "zz")
    assert err.status() == "StatusCode.NOT_FOUND"

    err = error_of(client.infer, "add_sub", shm_inputs("zz"))
    assert err.status() == "StatusCode.NOT_FOUND"
    assert err.message().endswith("Unable to find shared memory region: 'zz'")
    err = error_of(client.infer, "add_sub", shm_inputs("r", offsets=(0, 56)))
    assert err.status() == "StatusCode.INVALID_ARGUMENT"
    assert err.message().endswith("Invalid offset + byte size for shared memory region: 'r'")
    err = error_of(client.infer, "add_sub", shm_inputs("r", offsets=(0, 2**63 - 1)))
    assert err.message().endswith("Invalid offset for shared memory region: 'r'")
    out = grpcclient.InferRequestedOutput("OUTPUT0")
    out.set_shared_memory("r", 8)
    err = error_of(client.infer, "add_sub", shm_inputs("r"), outputs=[out])
    assert err.status() == "StatusCode.INTERNAL"
    assert "(8 bytes) should be at least 16 bytes" in err.message()
    assert_still_serving(client)


def test_unregister_during_inference(client, regions, tmp_path, server):
    data = np.arange(4, dtype=np.float32)
    h, key = regions("live", 32)
    shm.set_shared_memory_region(h, [data])
    client.register_system_shared_memory("live", key, 32)
    gate = str(tmp_path / "gate")
    g = grpcclient.InferInput("GATE", [1], "BYTES")
    g.set_data_from_numpy(np.array([gate.encode()], dtype=np.object_))
    d = grpcclient.InferInput("DATA", [4], "FP32")
    d.set_shared_memory("live", 16)
    out = grpcclient.InferRequestedOutput("OUT")
    out.set_shared_memory("live", 16, offset=16)
    done = threading.Event()
    outcome: dict = {}

    def callback(result, error):  # tritonclient passes both by keyword
        outcome["result"], outcome["error"] = result, error
        done.set()

    client.async_infer("shm_gate", [g, d], callback, outputs=[out])
    try:
        started = Path(gate + ".started")
        while not started.exists():  # the model signals once it holds the request
            assert not done.wait(0.01), outcome.get("error")
        client.unregister_system_shared_memory("live")
        assert not client.get_system_shared_memory_status().regions
    finally:
        Path(gate + ".release").touch()
    assert done.wait(60)
    assert outcome["error"] is None, outcome["error"]
    assert np.array_equal(shm.get_contents_as_numpy(h, np.float32, [8])[4:], data * 2)
    assert_still_serving(client)


def test_cuda_calls_answer_without_a_cuda_runtime(client):
    assert client.get_cuda_shared_memory_status().regions == {}
    client.unregister_cuda_shared_memory()
    err = error_of(client.register_cuda_shared_memory, "c", b"\0" * 64, 0, 64)
    assert err.status() == "StatusCode.UNIMPLEMENTED"
    assert "CUDA shared memory is not supported" in err.message()


def test_no_shared_memory_left_behind():
    assert [n for n in os.listdir("/dev/shm") if n.startswith(KEY_PREFIX)] == []


# Installed by ../shared/tools/setup-anchors.sh (not a Python package).
PERF_ANALYZER = Path(os.environ.get("ANCHORS", "/tmp/anchors")) / "bin" / "perf_analyzer"


@pytest.mark.anchors
@pytest.mark.skipif(not PERF_ANALYZER.exists(), reason=f"perf_analyzer is not installed at {PERF_ANALYZER} (../shared/tools/setup-anchors.sh installs it)")
def test_perf_analyzer_with_system_shared_memory_over_each_transport(server, client, tmp_path):
    import subprocess

    proc = subprocess.run(
        [
            str(PERF_ANALYZER), "-m", "add_sub", "-u", server.grpc_url, "-i", "grpc",
            "--shared-memory=system", "--output-shared-memory-size=64",
            "--concurrency-range=2:2", "--measurement-mode=count_windows",
            "--measurement-request-count=50", "--stability-percentage=1000",
            "--max-trials=5", "-f", str(tmp_path / "report.csv"),
        ],
        capture_output=True, text=True, timeout=120, cwd=tmp_path,
    )
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, output[-3000:]
    assert "throughput" in output.lower() and "Unable" not in output
    assert "error" not in output.lower()
    # perf_analyzer unregisters what it registered when it finishes.
    assert client.get_system_shared_memory_status().regions == {}
