"""Model behaviour through a real server: errors, prints, instances, versions, auto-complete."""

from __future__ import annotations

import concurrent.futures
import time

import numpy as np
import pytest
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException


def _faulty(client, mode: str):
    inp = httpclient.InferInput("MODE", [1], "BYTES")
    inp.set_data_from_numpy(np.array([mode.encode()], dtype=np.object_))
    return client.infer("faulty", [inp])


def _error_of(fn) -> InferenceServerException:
    with pytest.raises(InferenceServerException) as info:
        fn()
    return info.value


def test_execute_raising_gives_clear_error_and_instance_keeps_serving(http_client):
    exc = _error_of(lambda: _faulty(http_client, "raise"))
    assert exc.status() == "500"
    assert "Failed to process the request(s) for model 'faulty_0'" in exc.message()
    assert "ValueError: model exploded" in exc.message()
    assert "Traceback" not in exc.message()
    assert _faulty(http_client, "ok").as_numpy("OUT").shape == (1,)


def test_wrong_number_of_responses(http_client):
    exc = _error_of(lambda: _faulty(http_client, "too_few"))
    assert exc.status() == "500"
    assert "expected 1 responses, got 0" in exc.message()
    _faulty(http_client, "ok")


def test_wrong_kind_of_response(http_client):
    exc = _error_of(lambda: _faulty(http_client, "not_a_response"))
    assert "InferenceResponse" in exc.message() and "str" in exc.message()
    _faulty(http_client, "ok")


def test_error_response_keeps_its_code(http_client):
    exc = _error_of(lambda: _faulty(http_client, "error"))
    assert exc.status() == "400"
    assert exc.message() == "bad input value"


def test_worker_crash_fails_request_and_instance_restarts(http_client):
    before = int(_faulty(http_client, "ok").as_numpy("OUT")[0])
    exc = _error_of(lambda: _faulty(http_client, "crash"))
    assert "exited unexpectedly" in exc.message()
    deadline = time.monotonic() + 30
    while True:
        try:
            after = int(_faulty(http_client, "ok").as_numpy("OUT")[0])
            break
        except InferenceServerException:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)
    assert after != before


def test_prints_reach_server_log(server, http_client):
    inp = httpclient.InferInput("IN", [1], "BYTES")
    inp.set_data_from_numpy(np.array([b"marker-4242"], dtype=np.object_))
    http_client.infer("printer", [inp])
    assert server.wait_for_log(r"printer got marker-4242")
    assert server.wait_for_log(r"printer stderr marker-4242")
    assert server.wait_for_log(r"printer logged marker-4242")
    assert "printer initialized as printer_0" in server.log


@pytest.mark.serial
def test_three_instances_run_in_parallel(server):
    def call(_):
        client = httpclient.InferenceServerClient(server.http_url)
        inp = httpclient.InferInput("MS", [1], "INT32")
        inp.set_data_from_numpy(np.array([300], np.int32))
        try:
            r = client.infer("sleeper", [inp])
            return int(r.as_numpy("PID")[0]), float(r.as_numpy("START")[0]), float(r.as_numpy("END")[0])
        finally:
            client.close()

    call(0)  # warm connections and instances
    t0 = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(3) as pool:
        results = list(pool.map(call, range(3)))
    elapsed = time.monotonic() - t0
    assert len({pid for pid, _, _ in results}) == 3
    latest_start = max(s for _, s, _ in results)
    earliest_end = min(e for _, _, e in results)
    assert latest_start < earliest_end, "executions did not overlap"
    assert elapsed < 0.6, elapsed


def test_auto_complete_config(http_client):
    config = http_client.get_model_config("auto_complete")
    assert config["max_batch_size"] == 8
    assert [i["name"] for i in config["input"]] == ["X"]
    assert "dynamic_batching" in config
    inp = httpclient.InferInput("X", [1, 2], "INT64")
    inp.set_data_from_numpy(np.array([[3, 4]], np.int64))
    np.testing.assert_array_equal(http_client.infer("auto_complete", [inp]).as_numpy("Y"), [[6, 8]])


def _version_of(client, model: str, version: str = "") -> int:
    inp = httpclient.InferInput("IN", [1], "INT32")
    inp.set_data_from_numpy(np.array([0], np.int32))
    return int(client.infer(model, [inp], model_version=version).as_numpy("VERSION")[0])


def test_version_policy_latest_default(http_client):
    assert _version_of(http_client, "versioned") == 3
    assert http_client.get_model_metadata("versioned")["versions"] == ["3"]
    exc = _error_of(lambda: _version_of(http_client, "versioned", "1"))
    assert exc.status() == "404"
    assert not http_client.is_model_ready("versioned", "1")


def test_version_policy_all(http_client):
    assert _version_of(http_client, "versioned_all") == 2
    assert _version_of(http_client, "versioned_all", "1") == 1
    assert http_client.is_model_ready("versioned_all", "1")
    assert http_client.get_model_metadata("versioned_all")["versions"] == ["1", "2"]


def test_version_policy_specific(http_client):
    assert _version_of(http_client, "versioned_specific") == 3
    assert _version_of(http_client, "versioned_specific", "1") == 1
    exc = _error_of(lambda: _version_of(http_client, "versioned_specific", "2"))
    assert exc.status() == "404"


def test_zero_prefixed_and_non_numeric_version_folders_ignored(http_client):
    versions = http_client.get_model_metadata("versioned_all")["versions"]
    assert versions == ["1", "2"]
    assert _version_of(http_client, "versioned") == 3  # not 99 from folder "07" or "0"


def test_model_without_versions_is_unavailable(server, http_client):
    assert not http_client.is_model_ready("no_version")
    assert server.wait_for_log(r"\| no_version\s+\|.*UNAVAILABLE")


def test_optional_is_ready_is_honoured(http_client):
    def set_ready(value: bool) -> None:
        inp = httpclient.InferInput("READY", [1], "BOOL")
        inp.set_data_from_numpy(np.array([value]))
        http_client.infer("readiness", [inp])

    assert http_client.is_model_ready("readiness")
    set_ready(False)
    assert not http_client.is_model_ready("readiness")
    set_ready(True)
    assert http_client.is_model_ready("readiness")


def test_client_disconnect_reaches_is_cancelled(server):
    import json
    import socket

    body = json.dumps(
        {"inputs": [{"name": "TAG", "shape": [1], "datatype": "BYTES", "data": ["gone-77"]}]}
    ).encode()
    sock = socket.create_connection(("127.0.0.1", server.port))
    sock.sendall(
        b"POST /v2/models/cancellable/infer HTTP/1.1\r\nHost: x\r\n"
        + f"Content-Length: {len(body)}\r\n\r\n".encode()
        + body
    )
    time.sleep(0.3)
    sock.close()
    assert server.wait_for_log(r"cancellable gone-77 cancelled=True", timeout=8)


def test_instance_groups_names_kinds_and_processes(server):
    def call(_):
        client = httpclient.InferenceServerClient(server.http_url)
        inp = httpclient.InferInput("MS", [1], "INT32")
        inp.set_data_from_numpy(np.array([400], np.int32))
        try:
            r = client.infer("groups", [inp])
            return (
                r.as_numpy("NAME")[0].decode(),
                r.as_numpy("KIND")[0].decode(),
                r.as_numpy("DEVICE")[0].decode(),
                int(r.as_numpy("PID")[0]),
            )
        finally:
            client.close()

    with concurrent.futures.ThreadPoolExecutor(3) as pool:
        seen = sorted(pool.map(call, range(3)))
    assert [s[:3] for s in seen] == [
        ("cpu_pool_0", "CPU", "0"),
        ("cpu_pool_1", "CPU", "0"),
        ("groups_1_0", "MODEL", "0"),
    ]
    assert len({s[3] for s in seen}) == 3


def test_kind_gpu_without_gpu_fails_to_load_with_reason(server, http_client):
    from tritium.server.devices import gpu_count

    if gpu_count():
        pytest.skip("this machine has a GPU")
    assert not http_client.is_model_ready("gpu_only")
    assert server.wait_for_log(r"\| gpu_only .*UNAVAILABLE: .*KIND_GPU but no GPUs are available")
