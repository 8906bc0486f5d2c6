"""System shared memory over HTTP with the real tritonclient helpers and a real server.

Texts and status codes are Triton's (checked against Triton 2.51): register/unregister
answer an empty 200, status a JSON list, bounds errors 400, unknown regions 404, an
output too large for its region 500. Every test destroys the regions it creates, and the
last test checks that none is left in /dev/shm.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import threading
import uuid
from pathlib import Path

import numpy as np
import pytest
import tritonclient.http as httpclient
import tritonclient.utils.shared_memory as shm
from tritonclient.utils import (
    InferenceServerException,
    serialize_byte_tensor,
    serialized_byte_size,
)

from tritium.testing import ServerProcess

ROOT = Path(__file__).resolve().parents[2]
REPOS = [ROOT / "tests" / "models", ROOT / "examples" / "model_repository"]
MODELS = ("add_sub", "identity", "string_upper", "shm_gate")
KEY_PREFIX = f"shmtest_http_{os.getpid()}_"
# Installed by ../shared/tools/setup-anchors.sh (not a Python package).
PERF_ANALYZER = Path(os.environ.get("ANCHORS", "/tmp/anchors")) / "bin" / "perf_analyzer"


def server_args(*extra: str) -> list[str]:
    return ["--model-control-mode=explicit", *(f"--load-model={m}" for m in MODELS), *extra]


@pytest.fixture(scope="module")
def server():
    with ServerProcess(REPOS, server_args(), grpc=True) as proc:
        yield proc


@pytest.fixture
def client(server):
    c = httpclient.InferenceServerClient(server.http_url, network_timeout=60)
    yield c
    c.unregister_system_shared_memory()
    c.close()


@pytest.fixture
def regions():
    """``make(name, size)`` → a fresh /dev/shm region handle; all destroyed afterwards."""
    made: list = []

    def make(name: str, size: int):
        key = f"/{KEY_PREFIX}{name}_{uuid.uuid4().hex[:8]}"
        handle = shm.create_shared_memory_region(name, key, size)
        made.append((handle, key))
        return handle, key

    yield make
    for handle, _ in made:
        shm.destroy_shared_memory_region(handle)


def error_of(call, *args, **kwargs) -> InferenceServerException:
    with pytest.raises(InferenceServerException) as info:
        call(*args, **kwargs)
    return info.value


def assert_still_serving(client) -> None:
    a = np.arange(4, dtype=np.float32)
    inputs = [httpclient.InferInput(n, [4], "FP32") for n in ("INPUT0", "INPUT1")]
    for inp in inputs:
        inp.set_data_from_numpy(a)
    assert np.array_equal(client.infer("add_sub", inputs).as_numpy("OUTPUT0"), a * 2)


# -------------------------------------------------------------------- happy path


def test_add_sub_with_inputs_and_outputs_in_shared_memory(client, regions):
    a = np.arange(4, dtype=np.float32)
    b = np.full(4, 10, dtype=np.float32)
    h_in, k_in = regions("input", 32)
    h_out, k_out = regions("output", 64)
    shm.set_shared_memory_region(h_in, [a, b])
    client.register_system_shared_memory("in", k_in, 32)
    client.register_system_shared_memory("out", k_out, 48, offset=16)

    i0 = httpclient.InferInput("INPUT0", [4], "FP32")
    i0.set_shared_memory("in", 16)
    i1 = httpclient.InferInput("INPUT1", [4], "FP32")
    i1.set_shared_memory("in", 16, offset=16)
    o0 = httpclient.InferRequestedOutput("OUTPUT0")
    o0.set_shared_memory("out", 16)
    o1 = httpclient.InferRequestedOutput("OUTPUT1")
    o1.set_shared_memory("out", 16, offset=16)
    result = client.infer("add_sub", [i0, i1], outputs=[o0, o1])

    # Triton answers the outputs' metadata without data or parameters.
    assert result.get_response()["outputs"] == [
        {"name": "OUTPUT0", "datatype": "FP32", "shape": [4]},
        {"name": "OUTPUT1", "datatype": "FP32", "shape": [4]},
    ]
    got = shm.get_contents_as_numpy(h_out, np.float32, [12])
    assert np.array_equal(got[4:8], a + b) and np.array_equal(got[8:12], a - b)

    assert client.get_system_shared_memory_status() == [
        {"name": "in", "key": k_in, "offset": 0, "byte_size": 32},
        {"name": "out", "key": k_out, "offset": 16, "byte_size": 48},
    ]
    assert client.get_system_shared_memory_status("out") == [
        {"name": "out", "key": k_out, "offset": 16, "byte_size": 48}
    ]
    client.unregister_system_shared_memory("in")
    assert [r["name"] for r in client.get_system_shared_memory_status()] == ["out"]
    client.unregister_system_shared_memory()
    assert client.get_system_shared_memory_status() == []


def test_mixed_shm_and_binary_inputs_and_outputs(client, regions):
    a = np.arange(4, dtype=np.float32)
    h, k = regions("mixed", 16)
    shm.set_shared_memory_region(h, [a])
    client.register_system_shared_memory("mixed", k, 16)
    i0 = httpclient.InferInput("INPUT0", [4], "FP32")
    i0.set_shared_memory("mixed", 16)
    i1 = httpclient.InferInput("INPUT1", [4], "FP32")
    i1.set_data_from_numpy(np.ones(4, np.float32), binary_data=True)
    o0 = httpclient.InferRequestedOutput("OUTPUT0", binary_data=True)
    o1 = httpclient.InferRequestedOutput("OUTPUT1")
    o1.set_shared_memory("mixed", 16)  # the output overwrites the input region afterwards
    for _ in range(3):  # the same header again and again: no cached plan may ignore shm
        shm.set_shared_memory_region(h, [a])
        result = client.infer("add_sub", [i0, i1], outputs=[o0, o1])
        assert np.array_equal(result.as_numpy("OUTPUT0"), a + 1)
        assert np.array_equal(shm.get_contents_as_numpy(h, np.float32, [4]), a - 1)


def test_bytes_input_and_output_in_shared_memory(client, regions):
    text = np.array([b"abc", b"hello"], dtype=np.object_)
    serialized = serialize_byte_tensor(text)
    size = serialized_byte_size(serialized)
    h_in, k_in = regions("text_in", size)
    h_out, k_out = regions("text_out", 64)
    shm.set_shared_memory_region(h_in, [serialized])
    client.register_system_shared_memory("tin", k_in, size)
    client.register_system_shared_memory("tout", k_out, 64)
    inp = httpclient.InferInput("TEXT", [2], "BYTES")
    inp.set_shared_memory("tin", size)
    upper = httpclient.InferRequestedOutput("UPPER")
    upper.set_shared_memory("tout", 64)
    result = client.infer(
        "string_upper", [inp], outputs=[upper, httpclient.InferRequestedOutput("LENGTH")]
    )
    assert result.as_numpy("LENGTH").tolist() == [3, 5]
    got = shm.get_contents_as_numpy(h_out, np.object_, [2])
    assert [bytes(x) for x in got] == [b"ABC", b"HELLO"]


# --------------------------------------------------------------------- bad cases


def test_register_errors(client, regions):
    _, key = regions("reg", 64)
    client.register_system_shared_memory("r", key, 64)
    err = error_of(client.register_system_shared_memory, "r", key, 64)
    assert (err.status(), err.message()) == ("400", "shared memory region 'r' already in manager")
    err = error_of(client.register_system_shared_memory, "big", key, 65)
    assert (err.status(), err.message()) == (
        "400", "failed to register shared memory region 'big': invalid args"
    )
    err = error_of(client.register_system_shared_memory, "off", key, 8, offset=60)
    assert err.status() == "400"
    err = error_of(client.register_system_shared_memory, "ovf", key, 2, offset=2**64 - 1)
    assert err.message() == "failed to register shared memory region 'ovf': invalid args"
    err = error_of(client.register_system_shared_memory, "nokey", "/shmtest_absent_zz", 8)
    assert (err.status(), err.message()) == (
        "500", "Unable to open shared memory region: '/shmtest_absent_zz'"
    )
    err = error_of(client.register_system_shared_memory, "bad", "/a/../../etc/passwd", 8)
    assert err.status() == "400"
    err = error_of(client.get_system_shared_memory_status, "zz")
    assert (err.status(), err.message()) == (
        "404", "Unable to find system shared memory region: 'zz'"
    )
    client.unregister_system_shared_memory("zz")  # unknown: success, as in Triton
    assert [r["name"] for r in client.get_system_shared_memory_status()] == ["r"]
    assert_still_serving(client)


def test_reserved_keys_are_refused(client, regions):
    h, key = regions("tritiumlike", 8)
    reserved = "/tritium_worker_arena_0"
    os.link(f"/dev/shm{key}", f"/dev/shm{reserved}")
    try:
        err = error_of(client.register_system_shared_memory, "r", reserved, 8)
    finally:
        os.unlink(f"/dev/shm{reserved}")
    assert err.status() == "400"
    assert "reserved" in err.message() and "worker_arena" not in err.message()
    assert client.get_system_shared_memory_status() == []


def add_sub_inputs(region: str, sizes=(16, 16), offsets=(0, 16)):
    inputs = []
    for name, size, offset in zip(("INPUT0", "INPUT1"), sizes, offsets):
        inp = httpclient.InferInput(name, [4], "FP32")
        inp.set_shared_memory(region, size, offset=offset)
        inputs.append(inp)
    return inputs


@pytest.mark.parametrize(
    ("sizes", "offsets", "status", "text"),
    [
        ((16, 16), (64, 16), "400", "Invalid offset for shared memory region: 'in'"),
        ((16, 16), (56, 16), "400", "Invalid offset + byte size for shared memory region: 'in'"),
        ((16, 16), (2**64 - 8, 0), "400", "Invalid offset for shared memory region: 'in'"),
        ((16, 2**64 - 1), (0, 1), "400", "Integer overflow detected"),
        (
            (12, 16),
            (0, 16),
            "400",
            "[request id: <id_unknown>] input byte size mismatch for input 'INPUT0' for model "
            "'add_sub'. Expected 16, got 12",
        ),
    ],
)
def test_infer_bounds_errors(client, regions, sizes, offsets, status, text):
    _, key = regions("bounds", 64)
    client.register_system_shared_memory("in", key, 64)
    err = error_of(client.infer, "add_sub", add_sub_inputs("in", sizes, offsets))
    assert err.status() == status
    assert err.message().startswith(text)
    assert_still_serving(client)


def test_unknown_region_and_small_output(client, regions):
    _, key = regions("small", 64)
    client.register_system_shared_memory("in", key, 64)
    err = error_of(client.infer, "add_sub", add_sub_inputs("nowhere"))
    assert (err.status(), err.message()) == (
        "404", "Unable to find shared memory region: 'nowhere'"
    )
    out = httpclient.InferRequestedOutput("OUTPUT0")
    out.set_shared_memory("in", 8, offset=32)
    err = error_of(client.infer, "add_sub", add_sub_inputs("in"), outputs=[out])
    assert (err.status(), err.message()) == (
        "500",
        "shared memory size specified with the request for output 'OUTPUT0' (8 bytes) should "
        "be at least 16 bytes to hold the results",
    )
    assert_still_serving(client)


def test_unregister_during_inference_keeps_the_request_whole(client, regions, tmp_path):
    data = np.arange(8, dtype=np.float32)
    h, key = regions("inflight", 64)
    shm.set_shared_memory_region(h, [data])
    client.register_system_shared_memory("live", key, 64)
    gate = str(tmp_path / "gate")
    g = httpclient.InferInput("GATE", [1], "BYTES")
    g.set_data_from_numpy(np.array([gate.encode()], dtype=np.object_))
    d = httpclient.InferInput("DATA", [8], "FP32")
    d.set_shared_memory("live", 32)
    out = httpclient.InferRequestedOutput("OUT")
    out.set_shared_memory("live", 32, offset=32)
    result: dict = {}

    def call():
        c = httpclient.InferenceServerClient(client._parsed_url.netloc, network_timeout=60)
        try:
            result["response"] = c.infer("shm_gate", [g, d], outputs=[out])
        except Exception as exc:  # noqa: BLE001 - checked below
            result["error"] = exc
        finally:
            c.close()

    thread = threading.Thread(target=call)
    thread.start()
    try:
        wait_for_file(gate + ".started", thread)
        client.unregister_system_shared_memory("live")  # while the model holds the request
        assert client.get_system_shared_memory_status() == []
        # A new request cannot use the name any more; the one in flight still can.
        err = error_of(client.infer, "add_sub", add_sub_inputs("live"))
        assert err.status() == "404"
    finally:
        Path(gate + ".release").touch()
        thread.join(60)
    assert "error" not in result, result.get("error")
    assert result["response"].get_response()["outputs"] == [
        {"name": "OUT", "datatype": "FP32", "shape": [8]}
    ]
    got = shm.get_contents_as_numpy(h, np.float32, [16])
    assert np.array_equal(got[8:], data * 2)
    assert_still_serving(client)


def wait_for_file(path: str, thread: threading.Thread) -> None:
    # Waits on an event the model signals, not on a guess of how long it takes.
    event = threading.Event()
    while not os.path.exists(path):
        assert thread.is_alive(), "the request ended before the model held it"
        event.wait(0.01)


# -------------------------------------------------------- --allow-client-shm=false


def test_disallowed_client_shm(regions):
    _, key = regions("off", 32)
    with ServerProcess(REPOS, server_args("--allow-client-shm=false")) as proc:
        c = httpclient.InferenceServerClient(proc.http_url)
        try:
            assert "system_shared_memory" not in c.get_server_metadata()["extensions"]
            err = error_of(c.register_system_shared_memory, "r", key, 32)
            assert err.status() == "501"
            assert "--allow-client-shm=false" in err.message()
            err = error_of(c.infer, "add_sub", add_sub_inputs("r"))
            assert err.status() == "501"
            assert c.get_system_shared_memory_status() == []
            assert_still_serving(c)
        finally:
            c.close()


def test_metadata_and_cuda_routes(client):
    extensions = client.get_server_metadata()["extensions"]
    assert "system_shared_memory" in extensions
    assert "cuda_shared_memory" not in extensions  # no CUDA runtime: not offered
    assert client.get_cuda_shared_memory_status() == []
    client.unregister_cuda_shared_memory()  # nothing registered: success, as Triton answers
    err = error_of(client.register_cuda_shared_memory, "c", b"\0" * 64, 0, 64)
    assert err.status() == "501" and "CUDA shared memory is not supported" in err.message()
    err = error_of(client.get_cuda_shared_memory_status, "c")
    assert (err.status(), err.message()) == (
        "404", "Unable to find cuda shared memory region: 'c'"
    )


# ------------------------------------------------------------------ perf_analyzer


@pytest.mark.anchors
@pytest.mark.skipif(not PERF_ANALYZER.exists(), reason=f"perf_analyzer is not installed at {PERF_ANALYZER} (../shared/tools/setup-anchors.sh installs it)")
@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_perf_analyzer_with_system_shared_memory(server, protocol, tmp_path):
    url = server.http_url if protocol == "http" else server.grpc_url
    proc = subprocess.run(
        [
            str(PERF_ANALYZER), "-m", "add_sub", "-u", url, "-i", protocol,
            "--shared-memory=system", "--output-shared-memory-size=64",
            "--concurrency-range=2:2", "--measurement-mode=count_windows",
            "--measurement-request-count=50", "--stability-percentage=1000",
            "--max-trials=5", "-f", str(tmp_path / "report.csv"),
        ],
        capture_output=True, text=True, timeout=120, cwd=tmp_path,
    )
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, output[-3000:]
    assert "throughput" in output and "Unable" not in output and "error" not in output.lower()
    # perf_analyzer unregisters what it registered when it finishes.
    c = httpclient.InferenceServerClient(server.http_url)
    try:
        assert c.get_system_shared_memory_status() == []
    finally:
        c.close()


def test_no_shared_memory_left_behind():
    with contextlib.suppress(FileNotFoundError):
        left = [n for n in os.listdir("/dev/shm") if n.startswith(KEY_PREFIX)]
        assert left == []
