"""Sequence batching through a real server and the real tritonclient (HTTP, gRPC unary and
streaming): ordering per sequence, both strategies, control inputs, implicit state, and
Triton's errors and limits (texts checked against Triton 2.51)."""

from __future__ import annotations

import concurrent.futures
import json
import queue
import random
import subprocess
import sys
import threading
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
TEST_MODELS = ROOT / "tests" / "models"
EXAMPLES = ROOT / "examples"
BENCH_MODELS = ROOT / "bench" / "model_repository"  # the bench models, in this repository
MODELS = (
    "seq_accumulate",
    "seq_direct",
    "seq_state",
    "seq_single",
    "seq_describe",
    "seq_describe_nobatch",
    "running_mean",
)
NO_ID = "must specify a non-zero or non-empty correlation ID"


@pytest.fixture(scope="module")
def seq_server() -> Iterator[ServerProcess]:
    args = ["--model-control-mode=explicit", *(f"--load-model={m}" for m in MODELS)]
    with ServerProcess([TEST_MODELS, EXAMPLES / "model_repository"], args, grpc=True) as server:
        yield server


def _input(module, value: int, batched: bool = True):
    data = np.array([[value]] if batched else [value], np.int32)
    tensor = module.InferInput("INPUT", list(data.shape), "INT32")
    tensor.set_data_from_numpy(data)
    return tensor


def _http(server: ServerProcess) -> httpclient.InferenceServerClient:
    return httpclient.InferenceServerClient(server.http_url, network_timeout=60)


def _grpc(server: ServerProcess) -> grpcclient.InferenceServerClient:
    return grpcclient.InferenceServerClient(f"127.0.0.1:{server.grpc_port}")


def _run_sequence(client, module, model: str, key, values: list[int], binary: bool = True):
    """Send one whole sequence; its OUTPUT and BATCH answers."""
    sums, batches = [], []
    for step, value in enumerate(values):
        kwargs = dict(
            sequence_id=key,
            sequence_start=step == 0,
            sequence_end=step == len(values) - 1,
        )
        inputs = [_input(module, value)]
        if module is httpclient:
            inputs[0].set_data_from_numpy(np.array([[value]], np.int32), binary_data=binary)
        result = client.infer(model, inputs, **kwargs)
        sums.append(int(result.as_numpy("OUTPUT")[0, 0]))
        batches.append(int(result.as_numpy("BATCH")[0, 0]))
    return sums, batches


def _prefix_sums(values: list[int]) -> list[int]:
    return [int(v) for v in np.cumsum(values)]


def test_interleaved_sequences_over_http_and_grpc_get_their_own_running_sums(seq_server):
    """16 concurrent sequences on 8 slots (two instances, four candidates each): the rest
    wait for a slot; each answer is exactly its own sequence's running sum."""
    rng = random.Random(17)
    plans = []
    for n in range(16):
        key = (2**40 + n) if n % 2 else n + 1  # ids beyond 32 bits too
        values = [rng.randint(-50, 50) for _ in range(rng.randint(3, 7))]
        plans.append((n, key, values))

    def run(plan):
        n, key, values = plan
        module = (httpclient, grpcclient)[n % 2 == 0]
        client = _http(seq_server) if module is httpclient else _grpc(seq_server)
        try:
            return _run_sequence(client, module, "seq_accumulate", key, values, binary=n % 4 == 1)
        finally:
            client.close()

    with concurrent.futures.ThreadPoolExecutor(16) as pool:
        results = list(pool.map(run, plans))
    for (_, _, values), (sums, _) in zip(plans, results):
        assert sums == _prefix_sums(values)
    assert max(b for _, batches in results for b in batches) > 1
    stats = _http(seq_server).get_inference_statistics("seq_accumulate")["model_stats"][0]
    assert max(b["batch_size"] for b in stats["batch_stats"]) > 1
    assert stats["inference_count"] >= sum(len(v) for _, _, v in plans)


def test_grpc_stream_with_many_interleaved_sequences(seq_server):
    """Every step of 24 sequences sent at once on one stream: answers arrive per sequence
    in order with the right sums."""
    rng = random.Random(3)
    plans = {1000 + n: [rng.randint(0, 9) for _ in range(5)] for n in range(24)}
    answers: queue.Queue = queue.Queue()
    client = _grpc(seq_server)
    client.start_stream(callback=lambda result, error: answers.put((result, error)))
    try:
        for step in range(5):
            for key, values in plans.items():
                client.async_stream_infer(
                    "seq_accumulate",
                    [_input(grpcclient, values[step])],
                    request_id=f"{key}:{step}",
                    sequence_id=key,
                    sequence_start=step == 0,
                    sequence_end=step == 4,
                )
        got: dict[int, list[tuple[int, int]]] = {key: [] for key in plans}
        for _ in range(5 * len(plans)):
            result, error = answers.get(timeout=60)
            assert error is None, error
            key, step = map(int, result.get_response().id.split(":"))
            got[key].append((step, int(result.as_numpy("OUTPUT")[0, 0])))
    finally:
        client.stop_stream()
        client.close()
    for key, values in plans.items():
        assert [step for step, _ in got[key]] == list(range(5)), "answers out of order"
        assert [total for _, total in got[key]] == _prefix_sums(values)


def test_start_restarts_a_running_sequence_and_end_frees_the_id(seq_server):
    client = _http(seq_server)
    call = lambda v, **kw: int(  # noqa: E731
        client.infer("seq_accumulate", [_input(httpclient, v)], **kw).as_numpy("OUTPUT")[0, 0]
    )
    assert call(5, sequence_id=77, sequence_start=True) == 5
    assert call(6, sequence_id=77) == 11
    assert call(1, sequence_id=77, sequence_start=True) == 1  # restarted
    assert call(2, sequence_id=77, sequence_end=True) == 3
    with pytest.raises(InferenceServerException) as refused:
        call(1, sequence_id=77)
    assert refused.value.status() == "400"
    assert refused.value.message() == (
        "inference request for sequence 77 to model 'seq_accumulate' must specify the START "
        "flag on the first request of the sequence"
    )
    assert call(9, sequence_id=77, sequence_start=True) == 9  # the id is free again
    assert call(1, sequence_id=77, sequence_end=True) == 10


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_requests_without_id_or_start_are_refused_as_triton_does(seq_server, protocol):
    module = httpclient if protocol == "http" else grpcclient
    client = _http(seq_server) if protocol == "http" else _grpc(seq_server)
    expected_status = "400" if protocol == "http" else "StatusCode.INVALID_ARGUMENT"
    for kwargs in ({}, {"sequence_id": 0, "sequence_start": True}, {"sequence_id": ""}):
        with pytest.raises(InferenceServerException) as no_id:
            client.infer("seq_direct", [_input(module, 1)], **kwargs)
        assert no_id.value.status() == expected_status
        assert no_id.value.message() == (
            f"inference request to model 'seq_direct' {NO_ID}"
        )
    with pytest.raises(InferenceServerException) as unknown:
        client.infer("seq_direct", [_input(module, 1)], sequence_id="never-started")
    assert unknown.value.status() == expected_status
    assert "sequence never-started to model 'seq_direct' must specify the START flag" in (
        unknown.value.message()
    )


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_string_ids_and_the_direct_strategy_batch_concurrent_sequences(seq_server, protocol):
    module = httpclient if protocol == "http" else grpcclient
    barrier = threading.Barrier(4)

    def run(n: int):
        client = _http(seq_server) if protocol == "http" else _grpc(seq_server)
        values = [n + 1] * 4
        out = []
        try:
            for step, value in enumerate(values):
                barrier.wait(timeout=30)
                result = client.infer(
                    "seq_direct",
                    [_input(module, value)],
                    sequence_id=f"{protocol}-seq-{n}",
                    sequence_start=step == 0,
                    sequence_end=step == 3,
                )
                out.append((int(result.as_numpy("OUTPUT")[0, 0]), int(result.as_numpy("BATCH")[0, 0])))
        finally:
            client.close()
        return out

    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        results = list(pool.map(run, range(4)))
    for n, out in enumerate(results):
        assert [total for total, _ in out] == [(n + 1) * k for k in range(1, 5)]
    assert max(batch for out in results for _, batch in out) > 1


def test_implicit_state_with_data_file_and_zero_data_initial_state(seq_server):
    client = _grpc(seq_server)

    def call(value, **kwargs):
        result = client.infer("seq_state", [_input(grpcclient, value)], **kwargs)
        names = [o.name for o in result.get_response().outputs]
        return int(result.as_numpy("OUTPUT")[0, 0]), int(result.as_numpy("COUNTED")[0, 0]), names

    total, counted, names = call(1, sequence_id=5, sequence_start=True)
    assert (total, counted) == (101, 1)  # ACC starts at 100 (data_file), COUNT at 0
    assert "ACC_OUT" not in names and "COUNT_OUT" in names  # only configured outputs
    assert call(2, sequence_id=5)[:2] == (103, 2)
    assert call(3, sequence_id=6, sequence_start=True)[:2] == (103, 1)  # its own state
    assert call(4, sequence_id=5)[:2] == (107, 3)
    assert call(1, sequence_id=5, sequence_start=True)[:2] == (101, 1)  # START resets
    only = client.infer(
        "seq_state",
        [_input(grpcclient, 1)],
        outputs=[grpcclient.InferRequestedOutput("OUTPUT")],
        sequence_id=5,
        sequence_end=True,
    )
    assert [o.name for o in only.get_response().outputs] == ["OUTPUT"]
    assert int(only.as_numpy("OUTPUT")[0, 0]) == 102
    with pytest.raises(InferenceServerException, match="START flag"):
        call(1, sequence_id=5)


def test_idle_sequences_are_released_and_more_sequences_than_slots_wait(seq_server):
    """seq_single has one slot: a second sequence waits until the first ends; a sequence
    idle past max_sequence_idle_microseconds (1 s) is released."""
    client = _http(seq_server)
    call = lambda v, **kw: int(  # noqa: E731
        client.infer("seq_single", [_input(httpclient, v, batched=False)], **kw).as_numpy("OUTPUT")[0]
    )
    assert call(1, sequence_id=1, sequence_start=True) == 1
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        other = _http(seq_server)
        waiting = pool.submit(
            lambda: int(
                other.infer(
                    "seq_single", [_input(httpclient, 7, batched=False)],
                    sequence_id=2, sequence_start=True,
                ).as_numpy("OUTPUT")[0]
            )
        )
        time.sleep(0.3)
        assert not waiting.done()  # no free slot
        assert call(2, sequence_id=1, sequence_end=True) == 3
        assert waiting.result(timeout=30) == 7  # took the freed slot
    time.sleep(2.0)  # sequence 2 sits idle past 1 s
    with pytest.raises(InferenceServerException, match="sequence 2 to model 'seq_single' must"):
        call(1, sequence_id=2)
    assert call(4, sequence_id=2, sequence_start=True) == 4
    assert call(1, sequence_id=2, sequence_end=True) == 5


def _described(client, model: str, batched: bool, **kwargs) -> dict:
    result = client.infer(model, [_input(httpclient, 3, batched)], **kwargs)
    return json.loads(result.as_numpy("DESC").reshape(-1)[0])


def test_control_inputs_have_tritons_types_shapes_and_values(seq_server):
    client = _http(seq_server)
    start = _described(client, "seq_describe", True, sequence_id=2**31 + 3, sequence_start=True)
    assert start == {
        "INPUT": ["int32", [1, 1], [3]],
        "START": ["float32", [1, 1], [1.5]],
        "END": ["int32", [1, 1], [10]],
        "READY": ["bool", [1, 1], [True]],
        "CORRID": ["int32", [1, 1], [-(2**31) + 3]],  # wrapped to INT32 as Triton does
    }
    end = _described(client, "seq_describe", True, sequence_id=2**31 + 3, sequence_end=True)
    assert end["START"][2] == [0.5] and end["END"][2] == [20]
    nobatch = _described(
        client, "seq_describe_nobatch", False, sequence_id=2**32 + 9, sequence_start=True,
        sequence_end=True,
    )
    assert nobatch == {
        "INPUT": ["int32", [1], [3]],
        "START": ["bool", [1], [True]],
        "CORRID": ["uint32", [1], [9]],
    }


def test_sequence_batching_config_json_is_tritons(seq_server):
    config = _http(seq_server).get_model_config("seq_direct")
    assert config["sequence_batching"] == {
        "direct": {"max_queue_delay_microseconds": 20000, "minimum_slot_utilization": 0.5},
        "max_sequence_idle_microseconds": 1000000,
        "control_input": [
            {
                "name": "START",
                "control": [
                    {
                        "kind": "CONTROL_SEQUENCE_START",
                        "int32_false_true": [],
                        "fp32_false_true": [0, 1],
                        "bool_false_true": [],
                        "data_type": "TYPE_INVALID",
                    }
                ],
            },
            {
                "name": "CORRID",
                "control": [
                    {
                        "kind": "CONTROL_SEQUENCE_CORRID",
                        "int32_false_true": [],
                        "fp32_false_true": [],
                        "bool_false_true": [],
                        "data_type": "TYPE_STRING",
                    }
                ],
            },
        ],
        "state": [],
        "iterative_sequence": False,
    }


def test_bench_model_seq_sum_over_a_grpc_stream():
    """The bench model ``seq_sum`` loads and answers 32 interleaved sequences on one stream."""
    args = ["--model-control-mode=explicit", "--load-model=seq_sum"]
    with ServerProcess([BENCH_MODELS], args, grpc=True) as server:
        rng = random.Random(5)
        plans = {n + 1: [rng.randint(-9, 9) for _ in range(6)] for n in range(32)}
        answers: queue.Queue = queue.Queue()
        client = _grpc(server)
        client.start_stream(callback=lambda result, error: answers.put((result, error)))
        try:
            for step in range(6):
                for key, values in plans.items():
                    client.async_stream_infer(
                        "seq_sum",
                        [_input(grpcclient, values[step])],
                        request_id=f"{key}:{step}",
                        sequence_id=key,
                        sequence_start=step == 0,
                        sequence_end=step == 5,
                    )
            got: dict[int, list[int]] = {key: [] for key in plans}
            for _ in range(6 * len(plans)):
                result, error = answers.get(timeout=60)
                assert error is None, error
                key, _ = map(int, result.get_response().id.split(":"))
                got[key].append(int(result.as_numpy("OUTPUT")[0, 0]))
        finally:
            client.stop_stream()
            client.close()
        for key, values in plans.items():
            assert got[key] == _prefix_sums(values)
        stats = _http(server).get_inference_statistics("seq_sum")["model_stats"][0]
        assert max(b["batch_size"] for b in stats["batch_stats"]) > 1


def test_example_client_runs_several_sequences_of_the_example_model(seq_server):
    out = subprocess.run(
        [sys.executable, str(EXAMPLES / "sequence_client.py"), f"--url=127.0.0.1:{seq_server.grpc_port}"],
        capture_output=True, text=True, timeout=120,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == [
        "sequence 101: running mean [1.0, 1.5, 2.0, 2.5]",
        "sequence 102: running mean [10.0, 5.0, 6.667, 5.0]",
        "sequence 103: running mean [5.0, 5.0, 5.0, 5.0]",
        "sequence sensor-a: running mean [2.0, 3.0, 4.667, 7.5]",
    ]
