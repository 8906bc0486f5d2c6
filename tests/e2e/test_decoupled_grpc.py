"""Decoupled models over gRPC ``ModelStreamInfer`` with the real tritonclient (sync
stream and aio), on both gRPC transports; ``async def execute`` in ordinary models.

Triton's behaviour pinned here: every stream reply of a decoupled model carries the
``triton_final_response`` parameter; a final flag sent without a response becomes an
empty reply only with ``triton_enable_empty_final_response``; errors are per request and
the stream goes on; unary ``ModelInfer`` and HTTP ``/infer`` refuse decoupled models
(UNIMPLEMENTED / 501 "... doesn't support models with decoupled transaction policy").
"""

from __future__ import annotations

import asyncio
import queue
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.grpc.aio as aioclient
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from tritium.testing import ServerProcess

from .conftest import TEST_MODELS

MODELS = ("decoupled_words", "decoupled_async", "async_plain", "decoupled_batched")


@pytest.fixture(scope="module")
def server(grpc_impl: str) -> Iterator[ServerProcess]:
    args = [
        f"--grpc-implementation={grpc_impl}",
        "--model-control-mode=explicit",
        *(f"--load-model={m}" for m in MODELS),
    ]
    with ServerProcess([TEST_MODELS], args, grpc=True) as process:
        yield process


class Stream:
    """A tritonclient sync stream whose callback results land in a queue."""

    def __init__(self, url: str, **kwargs: object) -> None:
        self.client = grpcclient.InferenceServerClient(url)
        self.results: queue.Queue = queue.Queue()
        self.client.start_stream(
            callback=lambda result, error: self.results.put((result, error)), **kwargs
        )

    def send(self, count: int, request_id: str, mode: str = "", empty_final: bool = True) -> None:
        tensor = grpcclient.InferInput("COUNT", [1], "INT32")
        tensor.set_data_from_numpy(np.array([count], dtype=np.int32))
        self.client.async_stream_infer(
            "decoupled_words",
            [tensor],
            request_id=request_id,
            parameters={"mode": mode} if mode else None,
            enable_empty_final_response=empty_final,
        )

    def next(self, timeout: float = 30.0) -> tuple:
        return self.results.get(timeout=timeout)

    def until_final(self, timeout: float = 30.0) -> list[tuple]:
        """(id, INDEX or None, WORD or None, final) per reply, errors as (id?, error)."""
        got: list[tuple] = []
        while True:
            result, error = self.next(timeout)
            if error is not None:
                got.append(("error", error.message()))
                continue
            response = result.get_response()
            final = response.parameters["triton_final_response"].bool_param
            index = result.as_numpy("INDEX")
            word = result.as_numpy("WORD")
            got.append(
                (
                    response.id,
                    None if index is None else int(index[0]),
                    None if word is None else word[0].decode(),
                    final,
                )
            )
            if final:
                return got

    def close(self, cancel: bool = False) -> None:
        self.client.stop_stream(cancel_requests=cancel)
        self.client.close()


@pytest.fixture
def stream(server: ServerProcess) -> Iterator[Stream]:
    s = Stream(server.grpc_url)
    yield s
    s.close()


def test_n_responses_then_an_empty_final(stream: Stream) -> None:
    stream.send(3, "r1")
    assert stream.until_final() == [
        ("r1", 0, "w0", False),
        ("r1", 1, "w1", False),
        ("r1", 2, "w2", False),
        ("r1", None, None, True),
    ]


def test_final_flag_with_the_last_response(stream: Stream) -> None:
    stream.send(2, "r2", mode="final_with_data")
    assert stream.until_final() == [("r2", 0, "w0", False), ("r2", 1, "w1", True)]


def test_zero_responses(stream: Stream) -> None:
    stream.send(0, "zero")
    assert stream.until_final() == [("zero", None, None, True)]


def test_final_without_data_is_silent_unless_asked(stream: Stream) -> None:
    stream.send(1, "quiet", empty_final=False)
    stream.send(1, "loud")
    # The first request's final flag has no reply: its one response is all it sends.
    replies = stream.until_final()
    assert ("quiet", 0, "w0", False) in replies
    assert replies[-1] == ("loud", None, None, True)
    assert [r for r in replies if r[0] == "quiet"] == [("quiet", 0, "w0", False)]


def test_responses_from_a_background_thread(stream: Stream) -> None:
    stream.send(4, "bg", mode="thread")
    replies = stream.until_final()
    assert [r[1] for r in replies] == [0, 1, 2, 3, None]


def test_two_requests_interleave_on_one_stream(stream: Stream) -> None:
    stream.send(4, "a", mode="slow")
    stream.send(4, "b", mode="slow")
    order = []
    finals = 0
    while finals < 2:
        result, error = stream.next()
        assert error is None, error
        response = result.get_response()
        order.append(response.id)
        finals += response.parameters["triton_final_response"].bool_param
    assert order.count("a") == 5 and order.count("b") == 5
    # Both were answered side by side: b's first reply came before a's final.
    assert order.index("b") < len(order) - 1 - order[::-1].index("a")


def test_an_error_mid_stream_is_per_request(stream: Stream) -> None:
    stream.send(0, "e", mode="error_mid")
    replies = stream.until_final()
    assert replies == [
        ("e", 0, "w0", False),
        ("error", "bad word"),
        ("e", 1, "w1", False),
        ("e", None, None, True),
    ]
    stream.send(1, "after")  # the stream is still open
    assert stream.until_final()[0] == ("after", 0, "w0", False)


def test_execute_raising_ends_the_request_with_an_error(stream: Stream) -> None:
    stream.send(3, "boom", mode="raise")
    result, error = stream.next()
    assert result is None
    assert "asked to fail" in error.message()
    stream.send(1, "next")
    assert stream.until_final() == [("next", 0, "w0", False), ("next", None, None, True)]


def test_sender_used_after_final_raises(stream: Stream) -> None:
    stream.send(0, "closed", mode="after_final")
    assert stream.until_final() == [("closed", None, None, True)]
    stream.send(0, "report", mode="report")
    assert stream.until_final()[0][2] == (
        "Unable to send response. Response sender has been closed."
    )


def test_unary_infer_is_refused(server: ServerProcess) -> None:
    tensor = grpcclient.InferInput("COUNT", [1], "INT32")
    tensor.set_data_from_numpy(np.array([1], dtype=np.int32))
    with grpcclient.InferenceServerClient(server.grpc_url) as client:
        with pytest.raises(InferenceServerException) as info:
            client.infer("decoupled_words", [tensor])
    assert info.value.status() == "StatusCode.UNIMPLEMENTED"
    assert info.value.message() == (
        "ModelInfer RPC doesn't support models with decoupled transaction policy"
    )
    http_tensor = httpclient.InferInput("COUNT", [1], "INT32")
    http_tensor.set_data_from_numpy(np.array([1], dtype=np.int32))
    with httpclient.InferenceServerClient(server.http_url) as client:
        with pytest.raises(InferenceServerException) as info:
            client.infer("decoupled_words", [http_tensor])
    assert info.value.status() == "501"
    assert "HTTP end point doesn't support models with decoupled transaction policy" in str(
        info.value.message()
    )


def _cancel_notes(server: ServerProcess) -> int:
    return server.log.count("decoupled_words: cancelled after")


def _wait_for_cancel_note(server: ServerProcess, before: int, timeout: float = 30) -> int:
    """The number of responses the model sent before it saw its request cancelled."""
    deadline = time.monotonic() + timeout
    while _cancel_notes(server) <= before:
        assert time.monotonic() < deadline, server.log[-3000:]
        time.sleep(0.05)
    last = server.log.rsplit("decoupled_words: cancelled after", 1)[1]
    return int(last.split()[0])


def test_cancelling_the_stream_reaches_the_model(server: ServerProcess) -> None:
    before = _cancel_notes(server)
    s = Stream(server.grpc_url)
    s.send(200, "long", mode="slow")
    for _ in range(2):
        result, error = s.next()
        assert error is None
    s.close(cancel=True)
    assert _wait_for_cancel_note(server, before) < 100


def test_a_stream_deadline_reaches_the_model(server: ServerProcess) -> None:
    before = _cancel_notes(server)
    s = Stream(server.grpc_url, stream_timeout=1.0)
    try:
        s.send(200, "deadline", mode="slow")
        while True:
            result, error = s.next()
            if error is not None:
                break
        assert "Deadline Exceeded" in error.message()
    finally:
        s.close()
    assert _wait_for_cancel_note(server, before) < 100


def test_aio_stream_with_async_execute(server: ServerProcess) -> None:
    async def run() -> dict[str, list[int]]:
        async with aioclient.InferenceServerClient(server.grpc_url) as client:

            async def requests():
                for request_id, count in (("x", 5), ("y", 3)):
                    tensor = aioclient.InferInput("COUNT", [1], "INT32")
                    tensor.set_data_from_numpy(np.array([count], dtype=np.int32))
                    yield {
                        "model_name": "decoupled_async",
                        "inputs": [tensor],
                        "request_id": request_id,
                        "enable_empty_final_response": True,
                    }

            got: dict[str, list[int]] = {"x": [], "y": []}
            finals = 0
            async for result, error in client.stream_infer(requests()):
                assert error is None, error
                response = result.get_response()
                if response.parameters["triton_final_response"].bool_param:
                    finals += 1
                    if finals == 2:
                        break
                    continue
                got[response.id].append(int(result.as_numpy("INDEX")[0]))
            return got

    got = asyncio.run(asyncio.wait_for(run(), 60))
    assert got == {"x": [0, 1, 2, 3, 4], "y": [0, 1, 2]}


def test_decoupled_requests_batched_over_two_instances(server: ServerProcess) -> None:
    """Dynamic batching hands a decoupled model several requests at once: each keeps its
    own sender, responses and final flag."""
    got: queue.Queue = queue.Queue()
    client = grpcclient.InferenceServerClient(server.grpc_url)
    client.start_stream(callback=lambda result, error: got.put((result, error)))
    try:
        for value in range(24):
            tensor = grpcclient.InferInput("VALUE", [1, 1], "INT32")
            tensor.set_data_from_numpy(np.array([[value]], dtype=np.int32))
            client.async_stream_infer(
                "decoupled_batched", [tensor], request_id=str(value),
                enable_empty_final_response=True,
            )
        values: dict[str, list[int]] = {str(v): [] for v in range(24)}
        batches = []
        finals = 0
        while finals < 24:
            result, error = got.get(timeout=30)
            assert error is None, error
            response = result.get_response()
            if response.parameters["triton_final_response"].bool_param:
                finals += 1
                continue
            values[response.id].append(int(result.as_numpy("VALUE")[0, 0]))
            batches.append(int(result.as_numpy("BATCH")[0, 0]))
    finally:
        client.stop_stream()
        client.close()
    assert values == {str(v): [v, v + 1000] for v in range(24)}
    assert max(batches) > 1


def test_async_execute_in_an_ordinary_model(server: ServerProcess) -> None:
    """``async def execute`` is awaited (Triton's behaviour), with dynamic batching over
    two instances."""

    def one(i: int) -> tuple[np.ndarray, int]:
        with grpcclient.InferenceServerClient(server.grpc_url) as client:
            tensor = grpcclient.InferInput("X", [1, 2], "FP32")
            tensor.set_data_from_numpy(np.array([[i, -i]], dtype=np.float32))
            result = client.infer("async_plain", [tensor])
            return result.as_numpy("Y"), int(result.as_numpy("PID")[0, 0])

    with ThreadPoolExecutor(16) as pool:
        results = list(pool.map(one, range(64)))
    for i, (y, _) in enumerate(results):
        np.testing.assert_array_equal(y, [[2 * i, -2 * i]])
    assert len({pid for _, pid in results}) == 2


def _rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise AssertionError("no VmRSS")


def test_a_stalled_reader_does_not_grow_the_server(server: ServerProcess) -> None:
    """1 MiB responses as fast as the model makes them to a client that reads none:
    the stream is reset once the replies waiting for it pass the cap, and the model
    is told its request was cancelled."""
    import grpc
    from tritonclient.grpc import service_pb2, service_pb2_grpc

    assert server.proc is not None
    before = _cancel_notes(server)
    rss_before = _rss_kib(server.proc.pid)
    release = threading.Event()
    request = service_pb2.ModelInferRequest(model_name="decoupled_words", id="big")
    request.parameters["mode"].string_param = "big"
    tensor = request.inputs.add(name="COUNT", datatype="INT32", shape=[1])
    del tensor
    request.raw_input_contents.append(np.array([1000], dtype=np.int32).tobytes())

    def requests():
        yield request
        release.wait(60)

    channel = grpc.insecure_channel(server.grpc_url)
    try:
        replies = service_pb2_grpc.GRPCInferenceServiceStub(channel).ModelStreamInfer(requests())
        sent = _wait_for_cancel_note(server, before, timeout=60)
        growth_mib = (_rss_kib(server.proc.pid) - rss_before) / 1024
    finally:
        release.set()
        replies.cancel()
        channel.close()
    assert sent < 300
    assert growth_mib < 200


def test_perf_analyzer_streams_a_decoupled_model(grpc_impl: str, tmp_path) -> None:
    """The real perf_analyzer (``--streaming``) on the bench's repeat4 model: four
    responses per request. Checks the tool works end to end, not the speed."""
    import csv
    import os
    import subprocess
    from pathlib import Path

    perf = Path(os.environ.get("ANCHORS", "/tmp/anchors")) / "bin" / "perf_analyzer"
    if not perf.exists():
        pytest.skip(f"{perf} is not installed")
    bench_models = Path(__file__).resolve().parents[2] / "bench" / "model_repository"
    args = [f"--grpc-implementation={grpc_impl}", "--model-control-mode=explicit",
            "--load-model=repeat4"]
    with ServerProcess([bench_models], args, grpc=True) as server:
        report = tmp_path / "report.csv"
        cmd = [
            str(perf), "-m", "repeat4", "-u", server.grpc_url, "-i", "grpc", "--streaming",
            "--concurrency-range=2:2", "--measurement-interval=300",
            "--stability-percentage=999", "--max-trials=10", "-f", str(report),
        ]
        proc = subprocess.run(
            cmd, capture_output=True, text=True, timeout=90, stdin=subprocess.DEVNULL
        )
        output = proc.stdout + proc.stderr
        assert proc.returncode == 0, output[-3000:]
        rows = list(csv.DictReader(report.read_text().splitlines()))
        assert rows and float(rows[0]["Inferences/Second"]) > 0, output[-3000:]


def test_a_cancelled_queued_request_never_runs(server: ServerProcess) -> None:
    """One instance, busy with a request that blocks execute: the request queued behind
    it on the same stream is dropped when the stream is cancelled."""
    before = _cancel_notes(server)
    s = Stream(server.grpc_url)
    s.send(200, "busy", mode="block")
    result, error = s.next()
    assert error is None
    s.send(1, "queued-never-runs")
    time.sleep(0.3)
    s.close(cancel=True)
    assert _wait_for_cancel_note(server, before) < 100
    after = Stream(server.grpc_url)
    try:
        after.send(1, "later")
        assert after.until_final()[0] == ("later", 0, "w0", False)
    finally:
        after.close()
    assert "decoupled_words execute busy" in server.log
    assert "decoupled_words execute queued-never-runs" not in server.log


def test_a_worker_that_dies_ends_its_open_requests(server: ServerProcess) -> None:
    """Last in the module: the instance restarts afterwards."""
    s = Stream(server.grpc_url)
    try:
        s.send(1, "dies", mode="die")
        result, error = s.next()
        assert error is None and result.as_numpy("INDEX")[0] == 0
        result, error = s.next()
        assert result is None and "exited unexpectedly" in error.message()
    finally:
        s.close()


def test_leaving_an_aio_stream_cancels_its_request(server: ServerProcess) -> None:
    before = _cancel_notes(server)

    async def run() -> None:
        async with aioclient.InferenceServerClient(server.grpc_url) as client:

            async def requests():
                tensor = aioclient.InferInput("COUNT", [1], "INT32")
                tensor.set_data_from_numpy(np.array([200], dtype=np.int32))
                yield {
                    "model_name": "decoupled_words",
                    "inputs": [tensor],
                    "request_id": "aio-long",
                    "parameters": {"mode": "slow"},
                }
                await asyncio.sleep(60)  # keep the stream open from our side

            seen = 0
            responses = client.stream_infer(requests())
            async for _result, error in responses:
                assert error is None, error
                seen += 1
                if seen == 2:
                    break
            # Leaving the client closes its channel, which cancels the call.

    asyncio.run(asyncio.wait_for(run(), 60))
    assert _wait_for_cancel_note(server, before) < 100


def test_classification_applies_to_each_streamed_response(server: ServerProcess) -> None:
    # Each response of a decoupled model is classified as a single response would be.
    results: queue.Queue = queue.Queue()
    client = grpcclient.InferenceServerClient(server.grpc_url)
    client.start_stream(callback=lambda result, error: results.put((result, error)))
    try:
        tensor = grpcclient.InferInput("COUNT", [1], "INT32")
        tensor.set_data_from_numpy(np.array([2], dtype=np.int32))
        client.async_stream_infer(
            "decoupled_words",
            [tensor],
            request_id="cls",
            outputs=[grpcclient.InferRequestedOutput("INDEX", class_count=1)],
            enable_empty_final_response=True,
        )
        classes = []
        while True:
            result, error = results.get(timeout=30)
            assert error is None, error
            if result.get_response().parameters["triton_final_response"].bool_param:
                break
            classes.append(result.as_numpy("INDEX")[0].decode())
        assert classes == ["0:0", "1:0"]
    finally:
        client.stop_stream()
        client.close()
