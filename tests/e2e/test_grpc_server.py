"""gRPC from a real `tritium serve` process with the real tritonclient.grpc client."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
from tritonclient.utils import InferenceServerException

from tritium.testing import ServerProcess

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "model_repository"


@pytest.fixture(scope="module")
def grpc_server():
    with ServerProcess([EXAMPLES], grpc=True) as server:
        assert "Started GRPCInferenceService at" in server.log
        yield server


def test_health_metadata_and_infer_over_grpc(grpc_server):
    client = grpcclient.InferenceServerClient(grpc_server.grpc_url)
    try:
        assert client.is_server_live() and client.is_server_ready()
        assert client.is_model_ready("add_sub")
        assert client.get_model_metadata("add_sub").name == "add_sub"
        a = np.array([1, 2, 3, 4], np.float32)
        inputs = [grpcclient.InferInput("INPUT0", [4], "FP32"), grpcclient.InferInput("INPUT1", [4], "FP32")]
        inputs[0].set_data_from_numpy(a)
        inputs[1].set_data_from_numpy(a)
        result = client.infer("add_sub", inputs, request_id="g1")
        np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), a + a)
        assert result.get_response().id == "g1"
        with pytest.raises(InferenceServerException) as info:
            client.infer("nope", inputs)
        assert "StatusCode.NOT_FOUND" in str(info.value.status())
    finally:
        client.close()


def test_http_and_grpc_answer_the_same_server(grpc_server):
    import tritonclient.http as httpclient

    http = httpclient.InferenceServerClient(grpc_server.http_url)
    grpc = grpcclient.InferenceServerClient(grpc_server.grpc_url)
    try:
        assert http.get_model_config("identity")["max_batch_size"] == grpc.get_model_config(
            "identity", as_json=True
        )["config"]["max_batch_size"] == 64
    finally:
        http.close()
        grpc.close()
