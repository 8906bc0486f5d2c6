"""Ensembles through a real server with the real tritonclient, over HTTP and gRPC.

Models: ``tests/pipeline_models`` (``ens_two_step``: two batched steps; ``ens_diamond``: two
slow branches side by side, then a join) and the bench ensembles ``add_sub_twice`` and
``identity_chain`` from ``bench/model_repository``.
"""

from __future__ import annotations

import concurrent.futures
import json
import queue
import shutil
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from tritium.testing import ServerProcess

ROOT = Path(__file__).resolve().parents[2]
PIPELINES = ROOT / "tests" / "pipeline_models"
BENCH_MODELS = ROOT / "bench" / "model_repository"  # the bench models, in this repository
BENCH_ENSEMBLES = ("add_sub_twice", "identity_chain")


@pytest.fixture(scope="module")
def server() -> Iterator[ServerProcess]:
    args = [
        "--model-control-mode=explicit",
        "--load-model=ens_two_step",
        "--load-model=ens_diamond",
        "--load-model=ens_slow_chain",
        "--load-model=ens_nested",
        "--load-model=ens_big_chain",
        "--load-model=bls_call",
    ]
    args += [f"--load-model={m}" for m in BENCH_ENSEMBLES]
    with ServerProcess([PIPELINES, BENCH_MODELS], args, grpc=True) as proc:
        yield proc


@pytest.fixture(params=["http", "grpc"])
def protocol(request: pytest.FixtureRequest) -> str:
    return request.param


def _client(server: ServerProcess, protocol: str):  # noqa: ANN202
    if protocol == "http":
        return httpclient, httpclient.InferenceServerClient(server.http_url, network_timeout=60)
    return grpcclient, grpcclient.InferenceServerClient(server.grpc_url)


def _as_json(client, method: str, *args):  # noqa: ANN001, ANN202
    """A client call's answer as JSON on both protocols (gRPC needs ``as_json``)."""
    if isinstance(client, grpcclient.InferenceServerClient):
        return getattr(client, method)(*args, as_json=True)
    return getattr(client, method)(*args)


def _infer(server, protocol, model, x, outputs=None, **kwargs):  # noqa: ANN001, ANN202
    module, client = _client(server, protocol)
    try:
        inp = module.InferInput("X", list(x.shape), "FP32")
        inp.set_data_from_numpy(x)
        wanted = None if outputs is None else [module.InferRequestedOutput(n) for n in outputs]
        return client.infer(model, [inp], outputs=wanted, **kwargs)
    finally:
        client.close()


def test_composing_models_load_with_the_ensemble_and_it_is_ready(server, protocol):
    _, client = _client(server, protocol)
    try:
        for model in ("ens_two_step", "ens_double", "ens_diamond", "ens_add", "ens_slow_inc"):
            assert client.is_model_ready(model), model
        assert client.is_server_ready()
    finally:
        client.close()


def test_two_step_ensemble_runs_both_steps(server, protocol):
    x = np.array([[1, 2, 3]], np.float32)
    result = _infer(server, protocol, "ens_two_step", x, request_id="req-7")
    np.testing.assert_array_equal(result.as_numpy("MID"), 2 * x)
    np.testing.assert_array_equal(result.as_numpy("Y"), 4 * x)
    response = result.get_response()
    rid = response["id"] if protocol == "http" else response.id
    assert rid == "req-7"


def test_an_ensemble_can_be_a_step_of_another(server, protocol):
    x = np.array([[1, 2]], np.float32)
    np.testing.assert_array_equal(_infer(server, protocol, "ens_nested", x).as_numpy("Y"), 8 * x)


def test_ensemble_over_a_grpc_stream(server):
    answers: queue.Queue = queue.Queue()
    client = grpcclient.InferenceServerClient(server.grpc_url)
    try:
        client.start_stream(callback=lambda result, error: answers.put((result, error)))
        for v in range(3):
            inp = grpcclient.InferInput("X", [1, 1], "FP32")
            inp.set_data_from_numpy(np.array([[v]], np.float32))
            client.async_stream_infer("ens_two_step", [inp], request_id=f"s{v}")
        got = {}
        for _ in range(3):
            result, error = answers.get(timeout=30)
            assert error is None, error
            got[result.get_response().id] = float(result.as_numpy("Y")[0, 0])
        assert got == {"s0": 0.0, "s1": 4.0, "s2": 8.0}
    finally:
        client.stop_stream()
        client.close()


# 512 KiB per tensor: past KEEP_MIN_BYTES, so ens_big_chain's steps hand T and U over in
# shared memory (tests/integration/test_ensemble_shared_tensors.py shows they do).
BIG = np.arange(1 << 17, dtype=np.float32).reshape(1, 1 << 17)


def test_large_tensors_between_steps(server, protocol):
    for _ in range(3):  # the shared arenas are reused
        y = _infer(server, protocol, "ens_big_chain", BIG).as_numpy("Y")
        np.testing.assert_array_equal(y, BIG + 3)


def test_large_tensors_between_steps_over_a_grpc_stream(server):
    answers: queue.Queue = queue.Queue()
    client = grpcclient.InferenceServerClient(server.grpc_url)
    try:
        client.start_stream(callback=lambda result, error: answers.put((result, error)))
        for v in range(3):
            inp = grpcclient.InferInput("X", list(BIG.shape), "FP32")
            inp.set_data_from_numpy(BIG + v)
            client.async_stream_infer("ens_big_chain", [inp], request_id=f"s{v}")
        got = {}
        for _ in range(3):
            result, error = answers.get(timeout=60)
            assert error is None, error
            got[result.get_response().id] = result.as_numpy("Y")
        for v in range(3):
            np.testing.assert_array_equal(got[f"s{v}"], BIG + v + 3)
    finally:
        client.stop_stream()
        client.close()


def test_bls_call_to_an_ensemble_of_large_tensors(server, protocol):
    result = _infer(server, protocol, "bls_call", BIG, parameters={"target": "ens_big_chain"})
    np.testing.assert_array_equal(result.as_numpy("Y"), BIG + 3)


def test_requested_output_subset_is_all_that_comes_back(server, protocol):
    x = np.array([[5]], np.float32)
    result = _infer(server, protocol, "ens_two_step", x, outputs=["Y"])
    np.testing.assert_array_equal(result.as_numpy("Y"), 4 * x)
    assert result.as_numpy("MID") is None
    assert result.as_numpy("BATCH") is None


@pytest.mark.serial
def test_diamond_branches_run_side_by_side(server, protocol):
    x = np.array([[10, 20]], np.float32)
    _infer(server, protocol, "ens_diamond", x)  # warm: first calls pay for imports
    start = time.monotonic()
    result = _infer(server, protocol, "ens_diamond", x)
    elapsed = time.monotonic() - start
    np.testing.assert_array_equal(result.as_numpy("UP"), x + 1)
    np.testing.assert_array_equal(result.as_numpy("DOWN"), x - 1)
    np.testing.assert_array_equal(result.as_numpy("Y"), 2 * x)
    # Each branch sleeps 0.5 s: one after the other would take at least 1.0 s.
    assert 0.5 <= elapsed < 0.95, elapsed


def test_steps_batch_under_concurrency(server, protocol):
    _, client = _client(server, protocol)
    try:
        before = _as_json(client, "get_inference_statistics", "ens_double")
        ens_before = _as_json(client, "get_inference_statistics", "ens_two_step")
    finally:
        client.close()
    n = 16
    with concurrent.futures.ThreadPoolExecutor(n) as pool:
        futures = [
            pool.submit(_infer, server, protocol, "ens_two_step", np.full((1, 2), v, np.float32))
            for v in range(n)
        ]
        results = [f.result(60) for f in futures]
    for v, result in enumerate(results):
        np.testing.assert_array_equal(result.as_numpy("Y"), np.full((1, 2), 4 * v, np.float32))
    assert max(int(r.as_numpy("BATCH")[0, 0]) for r in results) > 1
    _, client = _client(server, protocol)
    try:
        after = _as_json(client, "get_inference_statistics", "ens_double")
        ens_after = _as_json(client, "get_inference_statistics", "ens_two_step")
    finally:
        client.close()

    def numbers(stats):  # noqa: ANN001, ANN202
        model = stats["model_stats"][0]
        success = int(model["inference_stats"]["success"]["count"])
        return int(model["inference_count"]), int(model["execution_count"]), success, model

    inf0, exe0, ok0, _ = numbers(before)
    inf1, exe1, ok1, model = numbers(after)
    assert inf1 - inf0 == 2 * n  # every request ran both steps
    assert ok1 - ok0 == 2 * n
    assert exe1 - exe0 < 2 * n  # ...in fewer executions: batches
    assert max(int(b["batch_size"]) for b in model["batch_stats"]) > 1
    e_inf0, e_exe0, e_ok0, ens0 = numbers(ens_before)
    e_inf1, e_exe1, e_ok1, ens1 = numbers(ens_after)
    assert e_inf1 - e_inf0 == n
    assert e_ok1 - e_ok0 == n
    # As Triton 2.51 counts an ensemble (tests/compat/test_ensemble_stats.py): one execution
    # per request whatever its steps' batches, and as compute times the sums of its steps'
    # (each step counting its batch's times), so here exactly what ens_double counted.
    assert e_exe1 - e_exe0 == n
    step0, step1 = numbers(before)[3], model
    for phase in ("compute_input", "compute_infer", "compute_output"):

        def took(stats, phase=phase):  # noqa: ANN001, ANN202
            duration = stats["inference_stats"][phase]
            return int(duration["count"]), int(duration["ns"])

        e_count0, e_ns0 = took(ens0)
        e_count1, e_ns1 = took(ens1)
        assert e_count1 - e_count0 == n
        assert e_ns1 - e_ns0 == took(step1)[1] - took(step0)[1], phase
    (batch,) = ens1["batch_stats"]
    assert int(batch["batch_size"]) == 1  # each request's own batch size


def test_failing_step_fails_the_request_with_its_message(server, protocol):
    x = np.array([[-1]], np.float32)
    with pytest.raises(InferenceServerException) as failure:
        _infer(server, protocol, "ens_two_step", x)
    assert "negative input is not allowed" in failure.value.message()
    _, client = _client(server, protocol)
    try:
        stats = _as_json(client, "get_inference_statistics", "ens_two_step")
    finally:
        client.close()
    assert int(stats["model_stats"][0]["inference_stats"]["fail"]["count"]) >= 1


def test_a_client_that_goes_away_stops_the_remaining_steps(server):
    def counts() -> tuple[int, int]:
        client = httpclient.InferenceServerClient(server.http_url)
        try:
            return tuple(  # type: ignore[return-value]
                int(client.get_inference_statistics(m)["model_stats"][0]["inference_count"])
                for m in ("ens_slow_inc", "ens_double")
            )
        finally:
            client.close()

    body = json.dumps(
        {"inputs": [{"name": "X", "shape": [1, 1], "datatype": "FP32", "data": [1.0]}]}
    ).encode()
    slow_before, double_before = counts()
    sock = socket.create_connection(("127.0.0.1", server.port))
    sock.sendall(
        b"POST /v2/models/ens_slow_chain/infer HTTP/1.1\r\nHost: x\r\n"
        + f"Content-Length: {len(body)}\r\n\r\n".encode()
        + body
    )
    time.sleep(0.15)  # step 0 (0.5 s) is running
    sock.close()
    time.sleep(1.0)  # step 0 is over: a step 1 would have run by now
    slow_after, double_after = counts()
    assert slow_after == slow_before + 1
    assert double_after == double_before


def test_config_prints_ensemble_scheduling_as_triton(server, protocol):
    _, client = _client(server, protocol)
    try:
        config = _as_json(client, "get_model_config", "ens_two_step")
        metadata = _as_json(client, "get_model_metadata", "ens_two_step")
    finally:
        client.close()
    config = config.get("config", config)
    assert config["platform"] == "ensemble"
    assert config.get("backend", "") == ""
    assert config.get("instance_group", []) == []
    steps = config["ensemble_scheduling"]["step"]
    assert [s["model_name"] for s in steps] == ["ens_double", "ens_double"]
    assert [int(s["model_version"]) for s in steps] == [-1, 1]
    assert steps[0]["input_map"] == {"X": "X"}
    assert steps[1]["output_map"] == {"Y": "Y", "BATCH": "BATCH"}
    assert metadata["platform"] == "ensemble"
    assert [t["name"] for t in metadata["outputs"]] == ["Y", "MID", "BATCH"]


def test_bench_ensembles_answer(server, protocol):
    module, client = _client(server, protocol)
    try:
        a = np.array([1, 2, 3, 4], np.float32)
        b = np.array([4, 3, 2, 1], np.float32)
        inputs = [
            module.InferInput("INPUT0", [4], "FP32"),
            module.InferInput("INPUT1", [4], "FP32"),
        ]
        inputs[0].set_data_from_numpy(a)
        inputs[1].set_data_from_numpy(b)
        result = client.infer("add_sub_twice", inputs)
        np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), 2 * a)
        np.testing.assert_array_equal(result.as_numpy("OUTPUT1"), 2 * b)
        x = np.arange(6, dtype=np.float32).reshape(2, 3)
        inp = module.InferInput("INPUT0", [2, 3], "FP32")
        inp.set_data_from_numpy(x)
        np.testing.assert_array_equal(client.infer("identity_chain", [inp]).as_numpy("OUTPUT0"), x)
    finally:
        client.close()


# Each invalid ensemble and the part of the reason it is refused with (the step and tensor).
INVALID = {
    "bad_unknown": (
        'step [ { model_name: "nope" model_version: -1 input_map { key: "X" value: "A" } '
        'output_map { key: "Y" value: "OUT" } } ]',
        "ensemble bad_unknown contains models that are not available or ambiguous: nope (step 0)",
    ),
    "bad_twice": (
        "step [ "
        + ", ".join(
            2
            * [
                '{ model_name: "add_sub" model_version: -1 input_map { key: "INPUT0" value: "A" } '
                'input_map { key: "INPUT1" value: "A" } output_map { key: "OUTPUT0" value: "OUT" } }'
            ]
        )
        + " ]",
        "ensemble tensor 'OUT' can appear in an output map only once for ensemble 'bad_twice' "
        "step 1",
    ),
    "bad_never": (
        'step [ { model_name: "add_sub" model_version: -1 input_map { key: "INPUT0" value: "A" } '
        'input_map { key: "INPUT1" value: "ghost" } output_map { key: "OUTPUT0" value: "OUT" } } ]',
        "step 0 (model 'add_sub'): input 'INPUT1' reads ensemble tensor 'ghost', which no step "
        "produces",
    ),
    "bad_no_output": (
        'step [ { model_name: "add_sub" model_version: -1 input_map { key: "INPUT0" value: "A" } '
        'input_map { key: "INPUT1" value: "A" } output_map { key: "OUTPUT0" value: "C" } } ]',
        "ensemble output 'OUT' is not produced by any step",
    ),
    "bad_cycle": (
        'step [ { model_name: "add_sub" model_version: -1 input_map { key: "INPUT0" value: "A" } '
        'input_map { key: "INPUT1" value: "y" } output_map { key: "OUTPUT0" value: "x" } '
        'output_map { key: "OUTPUT1" value: "OUT" } }, { model_name: "add_sub" model_version: -1 '
        'input_map { key: "INPUT0" value: "x" } input_map { key: "INPUT1" value: "A" } '
        'output_map { key: "OUTPUT0" value: "y" } } ]',
        "steps form a cycle through ensemble tensor",
    ),
    "bad_dtype": (
        'step [ { model_name: "add_sub" model_version: -1 input_map { key: "INPUT0" value: "I" } '
        'input_map { key: "INPUT1" value: "A" } output_map { key: "OUTPUT0" value: "OUT" } } ]',
        "ensemble tensor 'I': inconsistent data type: TYPE_INT32 is inferred from ensemble input "
        "'I' while TYPE_FP32 is inferred from step 0 (model 'add_sub') input 'INPUT0'",
    ),
    "bad_shape": (
        'step [ { model_name: "add_sub" model_version: -1 input_map { key: "INPUT0" value: "A5" } '
        'input_map { key: "INPUT1" value: "A" } output_map { key: "OUTPUT0" value: "OUT" } } ]',
        "ensemble tensor 'A5': inconsistent shape: [5] is inferred from ensemble input 'A5' "
        "while [4] is inferred from step 0 (model 'add_sub') input 'INPUT0'",
    ),
}
ENSEMBLE_IO = """
input [
  { name: "A" data_type: TYPE_FP32 dims: [ 4 ] optional: true },
  { name: "A5" data_type: TYPE_FP32 dims: [ 5 ] optional: true },
  { name: "I" data_type: TYPE_INT32 dims: [ 4 ] optional: true }
]
output [ { name: "OUT" data_type: TYPE_FP32 dims: [ 4 ] } ]
"""


def test_invalid_ensembles_are_refused_with_the_step_and_tensor(tmp_path: Path):

    shutil.copytree(ROOT / "examples" / "model_repository" / "add_sub", tmp_path / "add_sub")
    for name, (steps, _) in INVALID.items():
        (tmp_path / name / "1").mkdir(parents=True)
        (tmp_path / name / "config.pbtxt").write_text(
            f'name: "{name}"\nplatform: "ensemble"\n{ENSEMBLE_IO}\n'
            f"ensemble_scheduling {{ {steps} }}\n"
        )
    args = ["--exit-on-error=false", "--strict-readiness=false"]
    with ServerProcess([tmp_path], args, grpc=True) as proc:
        client = httpclient.InferenceServerClient(proc.http_url)
        grpc = grpcclient.InferenceServerClient(proc.grpc_url)
        try:
            assert client.is_model_ready("add_sub") and grpc.is_model_ready("add_sub")
            for name in INVALID:
                assert not client.is_model_ready(name), name
                assert not grpc.is_model_ready(name), name
                row = next(line for line in proc.log.splitlines() if f"| {name} " in line)
                assert "UNAVAILABLE" in row, row
            table = " ".join(proc.log.split())  # the table wraps nothing, but be safe
            for name, (_, reason) in INVALID.items():
                assert reason in table, (name, reason)
            with pytest.raises(InferenceServerException) as missing:
                client.infer("bad_cycle", [])
            assert missing.value.status() in ("400", "404", "503")
        finally:
            client.close()
            grpc.close()


def test_classification_of_an_ensemble_output_uses_its_label_file(server, protocol):
    """``ens_two_step``'s output Y has ``label_filename: "y_labels.txt"`` (cat, dog, bird):
    its classes carry the ensemble's own labels, as in Triton."""
    module, client = _client(server, protocol)
    try:
        inp = module.InferInput("X", [1, 3], "FP32")
        inp.set_data_from_numpy(np.array([[0.5, 2.0, 1.0]], np.float32))
        wanted = [module.InferRequestedOutput("Y", class_count=2)]
        result = client.infer("ens_two_step", [inp], outputs=wanted)
    finally:
        client.close()
    classes = [c.decode() for c in result.as_numpy("Y").reshape(-1)]
    assert classes == ["8.000000:1:dog", "4.000000:2:bird"]
