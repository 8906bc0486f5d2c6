"""Decoupled models over gRPC ``ModelStreamInfer`` against real Triton 2.51, with the
real tritonclient stream: the replies (ids, outputs, ``triton_final_response``, empty
finals only when asked for, errors) and the unary refusal are the same."""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

if not (Path(os.environ.get("ANCHORS", "/tmp/anchors")) / "bin" / "tritonserver").exists():
    pytest.skip("real Triton is not installed (setup-anchors.sh)", allow_module_level=True)

import tritonclient.grpc as grpcclient  # noqa: E402
from tritonclient.utils import InferenceServerException  # noqa: E402

from tritium.testing import ServerProcess  # noqa: E402

from .conftest import MODELS, TRITONSERVER, _port_is_free  # noqa: E402

pytestmark = pytest.mark.anchors

GRPC_PORTS = range(19500, 19600)


@pytest.fixture(scope="module")
def urls(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    """(Triton's gRPC address, tritium's), both serving ``decoupled_echo`` and ``add_sub``."""
    log = tmp_path_factory.mktemp("triton-grpc") / "triton.log"
    port = next(p for p in GRPC_PORTS if _port_is_free(p))
    args = [
        str(TRITONSERVER), f"--model-repository={MODELS}", "--model-control-mode=explicit",
        "--load-model=decoupled_echo", "--load-model=add_sub", "--allow-http=false", "--allow-metrics=false",
        "--grpc-address=127.0.0.1", f"--grpc-port={port}", "--exit-timeout-secs=10",
    ]
    with open(log, "wb") as out:
        triton = subprocess.Popen(
            args, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    tritium = ServerProcess(
        [MODELS],
        ["--model-control-mode=explicit", "--load-model=decoupled_echo", "--load-model=add_sub"],
        grpc=True,
    )
    try:
        tritium.start()
        url = f"127.0.0.1:{port}"
        deadline = time.monotonic() + 120
        while True:
            assert triton.poll() is None, log.read_text(errors="replace")[-3000:]
            try:
                with grpcclient.InferenceServerClient(url) as client:
                    if client.is_model_ready("decoupled_echo") and client.is_model_ready(
                        "add_sub"
                    ):
                        break
            except InferenceServerException:
                pass
            assert time.monotonic() < deadline, "Triton did not become ready"
            time.sleep(0.3)
        yield url, tritium.grpc_url
    finally:
        tritium.stop()
        if triton.poll() is None:
            triton.send_signal(signal.SIGTERM)
            try:
                triton.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(triton.pid, signal.SIGKILL)
                triton.wait(10)


def _stream(url: str, requests: list[tuple[str, str, bool]], replies: int) -> list:
    """Send ``(id, text, empty_final)`` requests on one stream and collect ``replies``
    replies as comparable tuples."""
    got: queue.Queue = queue.Queue()
    client = grpcclient.InferenceServerClient(url)
    client.start_stream(callback=lambda result, error: got.put((result, error)))
    try:
        for request_id, text, empty_final in requests:
            tensor = grpcclient.InferInput("text_input", [1], "BYTES")
            tensor.set_data_from_numpy(np.array([text.encode()], dtype=np.object_))
            client.async_stream_infer(
                "decoupled_echo", [tensor], request_id=request_id,
                enable_empty_final_response=empty_final,
            )
        out = []
        for _ in range(replies):
            result, error = got.get(timeout=30)
            if error is not None:
                # Triton appends the model's traceback; tritium never sends one.
                out.append(("error", error.message().split("\n\nAt:\n", 1)[0]))
                continue
            response = result.get_response()
            params = {k: v.bool_param for k, v in response.parameters.items()}
            text = result.as_numpy("text_output")
            out.append(
                (response.id, response.model_name, response.model_version, params,
                 None if text is None else text.tolist())
            )
        time.sleep(0.3)
        assert got.empty(), "more replies than expected"
        return out
    finally:
        client.stop_stream()
        client.close()


CASES = {
    "words-with-empty-final": ([("a", "one two", True)], 3),
    "words-without-empty-final": ([("b", "one two", False)], 2),
    "nothing-with-empty-final": ([("c", "", True)], 1),
    "error-mid-stream": ([("d", "one fail two", True)], 4),
    "two-requests": ([("e", "x", False), ("f", "y z", True)], 4),
    "execute-raises": ([("g", "raise", True), ("h", "after", True)], 3),
    "send-after-final": ([("i", "after_final", True), ("j", "report", False)], 2),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_stream_replies(urls: tuple[str, str], case: str) -> None:
    requests, replies = CASES[case]
    theirs = _stream(urls[0], requests, replies)
    ours = _stream(urls[1], requests, replies)
    print(f"triton : {theirs}\ntritium: {ours}")
    assert ours == theirs


def test_replies_of_an_ordinary_model_on_a_stream(urls: tuple[str, str]) -> None:
    """Triton marks every stream reply with ``triton_final_response``, also for models
    that are not decoupled."""
    answers = []
    for url in urls:
        got: queue.Queue = queue.Queue()
        client = grpcclient.InferenceServerClient(url)
        client.start_stream(callback=lambda result, error, got=got: got.put((result, error)))
        try:
            tensors = [grpcclient.InferInput(f"INPUT{i}", [4], "FP32") for i in range(2)]
            for tensor in tensors:
                tensor.set_data_from_numpy(np.arange(4, dtype=np.float32))
            client.async_stream_infer("add_sub", tensors, request_id="p")
            client.async_stream_infer("add_sub", tensors[:1], request_id="q")  # fails
            replies = []
            for _ in range(2):
                result, error = got.get(timeout=30)
                if error is not None:
                    replies.append(("error", error.message()))
                    continue
                response = result.get_response()
                replies.append(
                    (response.id, {k: v.bool_param for k, v in response.parameters.items()},
                     result.as_numpy("OUTPUT0").tolist())
                )
        finally:
            client.stop_stream()
            client.close()
        answers.append(sorted(replies, key=repr))  # completion order may differ
    print(f"triton : {answers[0]}\ntritium: {answers[1]}")
    assert answers[1] == answers[0]


def test_unary_infer_is_refused(urls: tuple[str, str]) -> None:
    answers = []
    for url in urls:
        tensor = grpcclient.InferInput("text_input", [1], "BYTES")
        tensor.set_data_from_numpy(np.array([b"a"], dtype=np.object_))
        with grpcclient.InferenceServerClient(url) as client:
            with pytest.raises(InferenceServerException) as info:
                client.infer("decoupled_echo", [tensor])
        answers.append((info.value.status(), info.value.message()))
    assert answers[1] == answers[0]
