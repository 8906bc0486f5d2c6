"""Big requests through a real server take the off-loop path (bodies and responses of
``OFFLOAD_BYTES`` or more are decoded, encoded and compressed on a thread) and answer
exactly what the usual path answers: binary, JSON and raw bodies, gzip both ways, BYTES.
"""

from __future__ import annotations

import http.client
from pathlib import Path

import numpy as np
import orjson
import pytest
import tritonclient.http as httpclient

from tritium.frontends.offload import OFFLOAD_BYTES
from tritium.testing import ServerProcess

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "model_repository"
COUNT = OFFLOAD_BYTES // 4 * 3  # FP32 elements: three times the threshold


@pytest.fixture(scope="module")
def server():
    with ServerProcess([EXAMPLES], ["--http-max-input-size=268435456"]) as running:
        yield running


@pytest.fixture
def client(server):
    c = httpclient.InferenceServerClient(server.http_url, network_timeout=120)
    yield c
    c.close()


def _identity(client, values: np.ndarray, binary: bool, **kwargs) -> np.ndarray:  # noqa: ANN001
    tensor = httpclient.InferInput("INPUT0", list(values.shape), "FP32")
    tensor.set_data_from_numpy(values, binary_data=binary)
    output = httpclient.InferRequestedOutput("OUTPUT0", binary_data=binary)
    return client.infer("identity", [tensor], outputs=[output], **kwargs).as_numpy("OUTPUT0")


@pytest.mark.parametrize("binary", [True, False])
def test_big_bodies_answer_like_small_ones(client, binary: bool) -> None:
    values = np.arange(COUNT, dtype=np.float32).reshape(1, COUNT) / 7
    assert np.array_equal(_identity(client, values, binary), values)
    small = values[:, :8]
    assert np.array_equal(_identity(client, small, binary), small)


@pytest.mark.parametrize("request_gzip", [False, True])
def test_big_responses_are_compressed_off_the_loop(client, request_gzip: bool) -> None:
    values = np.ones((1, COUNT), np.float32)
    result = _identity(
        client,
        values,
        True,
        request_compression_algorithm="gzip" if request_gzip else None,
        response_compression_algorithm="gzip",
    )
    assert np.array_equal(result, values)


def test_big_raw_body(server) -> None:
    values = np.arange(COUNT, dtype=np.float32)
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=120)
    try:
        conn.request(
            "POST",
            "/v2/models/identity/infer",
            body=values.tobytes(),
            headers={"Inference-Header-Content-Length": "0"},
        )
        reply = conn.getresponse()
        body = reply.read()
    finally:
        conn.close()
    assert reply.status == 200, body[:300]
    header_length = int(reply.getheader("Inference-Header-Content-Length"))
    header = orjson.loads(body[:header_length])
    assert header["outputs"][0]["shape"] == [1, COUNT]
    assert np.array_equal(np.frombuffer(body[header_length:], np.float32), values)


def test_many_bytes_elements(client) -> None:
    count = 200_000
    texts = np.array([b"ab"] * (count - 1) + [b"zz"], dtype=np.object_)
    tensor = httpclient.InferInput("TEXT", [count], "BYTES")
    tensor.set_data_from_numpy(texts)
    result = client.infer("string_upper", [tensor])
    upper = result.as_numpy("UPPER")
    assert upper.shape == (count,) and upper[0] == b"AB" and upper[-1] == b"ZZ"
    assert result.as_numpy("LENGTH").sum() == 2 * count


def test_errors_of_big_bodies_keep_their_status(server) -> None:
    data = np.ones(COUNT, np.float32).tobytes()
    header = orjson.dumps(
        {
            "inputs": [
                {
                    "name": "INPUT0",
                    "datatype": "FP32",
                    "shape": [1, COUNT + 1],  # one more element than sent
                    "parameters": {"binary_data_size": len(data)},
                }
            ]
        }
    )
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=120)
    try:
        conn.request(
            "POST",
            "/v2/models/identity/infer",
            body=header + data,
            headers={"Inference-Header-Content-Length": str(len(header))},
        )
        reply = conn.getresponse()
        body = reply.read()
    finally:
        conn.close()
    assert reply.status == 400
    assert b"input byte size mismatch for input 'INPUT0'" in body


@pytest.mark.parametrize("implementation", ["native", "grpcio"])
def test_big_compressed_grpc_responses(implementation: str) -> None:
    import tritonclient.grpc as grpcclient

    args = [
        f"--grpc-implementation={implementation}",
        "--grpc-infer-response-compression-level=high",
    ]
    values = np.arange(COUNT, dtype=np.float32).reshape(1, COUNT)
    with ServerProcess([EXAMPLES], args, grpc=True) as running:
        client = grpcclient.InferenceServerClient(running.grpc_url)
        try:
            tensor = grpcclient.InferInput("INPUT0", [1, COUNT], "FP32")
            tensor.set_data_from_numpy(values)
            result = client.infer("identity", [tensor]).as_numpy("OUTPUT0")
            small = client.infer(
                "identity", [_small_grpc_input(grpcclient, values[:, :8])]
            ).as_numpy("OUTPUT0")
        finally:
            client.close()
    assert np.array_equal(result, values)
    assert np.array_equal(small, values[:, :8])


def _small_grpc_input(module, values: np.ndarray):  # noqa: ANN001, ANN202
    tensor = module.InferInput("INPUT0", list(values.shape), "FP32")
    tensor.set_data_from_numpy(values)
    return tensor
