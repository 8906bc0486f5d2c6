"""``--http-restricted-api`` and ``--grpc-restricted-protocol`` with the real clients.

Triton's behaviour: a request to a restricted group without the header, or with another
value, is refused (HTTP 403 ``This API is restricted, expecting header '<key>'``; gRPC
UNAVAILABLE ``This protocol is restricted, expecting header 'triton-grpc-protocol-<key>'``);
other groups answer as usual. The value never reaches the log, even at verbose level.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from tritium.testing import ServerProcess

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "model_repository"
SECRET = "s3cret-v4lue"
ADMIN = "adm1n-v4lue"


@pytest.fixture(scope="module", params=["native", "grpcio"])
def server(request: pytest.FixtureRequest) -> Iterator[ServerProcess]:
    args = [
        f"--grpc-implementation={request.param}",
        "--log-verbose=1",
        f"--http-restricted-api=inference:infer-key={SECRET}",
        f"--http-restricted-api=model-config,statistics,shared-memory:admin-key={ADMIN}",
        f"--grpc-restricted-protocol=inference:infer-key={SECRET}",
        f"--grpc-restricted-protocol=model-config,statistics,shared-memory:admin-key={ADMIN}",
    ]
    with ServerProcess([EXAMPLES], args, grpc=True) as running:
        yield running
    assert SECRET not in running.log and ADMIN not in running.log


def _inputs(module):  # noqa: ANN001, ANN202 - tritonclient.http or .grpc
    inputs = []
    for name in ("INPUT0", "INPUT1"):
        tensor = module.InferInput(name, [4], "FP32")
        tensor.set_data_from_numpy(np.ones(4, np.float32))
        inputs.append(tensor)
    return inputs


def test_http_restricted_groups(server: ServerProcess) -> None:
    client = httpclient.InferenceServerClient(server.http_url)
    try:
        for headers in (None, {"infer-key": "wrong"}, {"admin-key": ADMIN}):
            with pytest.raises(InferenceServerException) as refused:
                client.infer("add_sub", _inputs(httpclient), headers=headers)
            assert refused.value.status() == "403"
            assert "This API is restricted, expecting header 'infer-key'" in str(refused.value)
        result = client.infer("add_sub", _inputs(httpclient), headers={"infer-key": SECRET})
        assert result.as_numpy("OUTPUT0").tolist() == [2.0] * 4
        with pytest.raises(InferenceServerException, match="expecting header 'admin-key'"):
            client.get_model_config("add_sub")
        with pytest.raises(InferenceServerException, match="expecting header 'admin-key'"):
            client.get_inference_statistics("add_sub")
        with pytest.raises(InferenceServerException, match="expecting header 'admin-key'"):
            client.get_system_shared_memory_status()
        assert client.get_model_config("add_sub", headers={"admin-key": ADMIN})["name"] == "add_sub"
        # Groups left open answer as usual.
        assert client.is_server_live() and client.is_model_ready("add_sub")
        assert client.get_model_metadata("add_sub")["name"] == "add_sub"
    finally:
        client.close()


def test_grpc_restricted_groups(server: ServerProcess) -> None:
    client = grpcclient.InferenceServerClient(server.grpc_url)
    try:
        for headers in (None, {"triton-grpc-protocol-infer-key": "wrong"}, {"infer-key": SECRET}):
            with pytest.raises(InferenceServerException) as refused:
                client.infer("add_sub", _inputs(grpcclient), headers=headers)
            assert refused.value.status() == "StatusCode.UNAVAILABLE"
            assert (
                "This protocol is restricted, expecting header "
                "'triton-grpc-protocol-infer-key'" in str(refused.value)
            )
        result = client.infer(
            "add_sub", _inputs(grpcclient), headers={"triton-grpc-protocol-infer-key": SECRET}
        )
        assert result.as_numpy("OUTPUT0").tolist() == [2.0] * 4
        admin = {"triton-grpc-protocol-admin-key": ADMIN}
        with pytest.raises(InferenceServerException, match="UNAVAILABLE"):
            client.get_model_config("add_sub")
        with pytest.raises(InferenceServerException, match="UNAVAILABLE"):
            client.get_inference_statistics("add_sub")
        with pytest.raises(InferenceServerException, match="UNAVAILABLE"):
            client.get_system_shared_memory_status()
        assert client.get_model_config("add_sub", headers=admin).config.name == "add_sub"
        assert client.is_server_live() and client.is_model_ready("add_sub")
        assert client.get_model_metadata("add_sub").name == "add_sub"
    finally:
        client.close()


def test_grpc_stream_is_restricted_as_inference(server: ServerProcess) -> None:
    results: list = []
    client = grpcclient.InferenceServerClient(server.grpc_url)
    try:
        client.start_stream(callback=lambda result, error: results.append(error))
        try:
            client.async_stream_infer("add_sub", _inputs(grpcclient))
        except InferenceServerException:
            pass  # the refusal may end the stream first; its error reached the callback
        client.stop_stream()
    finally:
        client.close()
    assert results and "expecting header 'triton-grpc-protocol-infer-key'" in str(results[0])
