"""The real ``tritonclient.grpc`` (sync, asyncio, streaming) against the native transport."""

from __future__ import annotations

import asyncio
import queue
from pathlib import Path

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.grpc.aio as aioclient
from tritonclient.utils import InferenceServerException

from tritium.testing import ServerProcess

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "model_repository"
ARGS = ["--grpc-implementation=native"]


@pytest.fixture(scope="module")
def server():
    with ServerProcess([EXAMPLES], ARGS, grpc=True) as proc:
        yield proc


def _add_sub_inputs(module, a: np.ndarray, b: np.ndarray) -> list:
    inputs = [
        module.InferInput("INPUT0", list(a.shape), "FP32"),
        module.InferInput("INPUT1", list(b.shape), "FP32"),
    ]
    inputs[0].set_data_from_numpy(a)
    inputs[1].set_data_from_numpy(b)
    return inputs


def test_sync_client_health_metadata_infer_and_errors(server):
    client = grpcclient.InferenceServerClient(server.grpc_url)
    try:
        assert client.is_server_live() and client.is_server_ready()
        assert client.is_model_ready("add_sub") and not client.is_model_ready("nope")
        assert client.get_server_metadata().name
        assert client.get_model_metadata("add_sub").inputs[0].name == "INPUT0"
        assert client.get_model_config("add_sub").config.name == "add_sub"
        assert client.get_inference_statistics("add_sub").model_stats[0].name == "add_sub"
        a, b = np.arange(4, dtype=np.float32), np.full(4, 2, np.float32)
        result = client.infer(
            "add_sub", _add_sub_inputs(grpcclient, a, b), request_id="n1", headers={"x-user": "u"}
        )
        np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), a + b)
        np.testing.assert_array_equal(result.as_numpy("OUTPUT1"), a - b)
        assert result.get_response().id == "n1"
        gz = client.infer(
            "add_sub", _add_sub_inputs(grpcclient, a, b), compression_algorithm="gzip"
        )
        np.testing.assert_array_equal(gz.as_numpy("OUTPUT0"), a + b)
        with pytest.raises(InferenceServerException) as info:
            client.infer("nope", _add_sub_inputs(grpcclient, a, b))
        assert "StatusCode.NOT_FOUND" in str(info.value.status())
        index = client.get_model_repository_index(as_json=True)["models"]
        assert {"name": "add_sub", "version": "1", "state": "READY"} in index
    finally:
        client.close()


def test_streaming_answers_every_request_and_reports_errors(server):
    client = grpcclient.InferenceServerClient(server.grpc_url)
    replies: queue.Queue = queue.Queue()
    a = np.arange(4, dtype=np.float32)
    try:
        client.start_stream(lambda result, error: replies.put((result, error)))
        for i in range(20):
            client.async_stream_infer(
                "add_sub", _add_sub_inputs(grpcclient, a, a), request_id=str(i)
            )
        client.async_stream_infer("nope", _add_sub_inputs(grpcclient, a, a), request_id="bad")
        got, errors = set(), []
        for _ in range(21):
            result, error = replies.get(timeout=30)
            if error is not None:
                errors.append(str(error))
            else:
                np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), a + a)
                got.add(result.get_response().id)
        assert got == {str(i) for i in range(20)}
        assert len(errors) == 1 and "nope" in errors[0]
    finally:
        client.stop_stream()
        client.close()


def test_asyncio_client_concurrent_infers_and_stream(server):
    async def main() -> None:
        client = aioclient.InferenceServerClient(server.grpc_url)
        try:
            assert await client.is_server_ready()
            arrays = [np.full(4, i, np.float32) for i in range(32)]
            results = await asyncio.gather(
                *(client.infer("add_sub", _add_sub_inputs(aioclient, x, x)) for x in arrays)
            )
            for x, result in zip(arrays, results):
                np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), x + x)

            async def requests():
                for i in range(8):
                    x = np.full(4, i, np.float32)
                    yield {"model_name": "add_sub", "inputs": _add_sub_inputs(aioclient, x, x),
                           "request_id": str(i)}  # fmt: skip

            seen = set()
            async for result, error in client.stream_infer(requests()):
                assert error is None
                seen.add(result.get_response().id)
                if len(seen) == 8:
                    break
            assert seen == {str(i) for i in range(8)}
        finally:
            await client.close()

    asyncio.run(main())


def test_100_mb_request_and_response(server):
    client = grpcclient.InferenceServerClient(server.grpc_url)
    try:
        values = np.random.default_rng(0).random((1, 26_214_400), dtype=np.float32)
        tensor = grpcclient.InferInput("INPUT0", list(values.shape), "FP32")
        tensor.set_data_from_numpy(values)
        result = client.infer("identity", [tensor], client_timeout=120)
        np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), values)
    finally:
        client.close()


def test_compressed_responses_when_configured():
    args = [*ARGS, "--grpc-infer-response-compression-level=high"]
    with ServerProcess([EXAMPLES], args, grpc=True) as proc:
        client = grpcclient.InferenceServerClient(proc.grpc_url)
        try:
            values = np.zeros((1, 100_000), np.float32)
            tensor = grpcclient.InferInput("INPUT0", list(values.shape), "FP32")
            tensor.set_data_from_numpy(values)
            result = client.infer("identity", [tensor])
            np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), values)
        finally:
            client.close()
