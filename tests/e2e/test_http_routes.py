"""Health, metadata and config routes, with Triton's JSON shapes and status codes."""

from __future__ import annotations

import http.client
import json

import pytest


def _get(server, path: str, method: str = "GET", body: bytes | None = None):
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
    try:
        conn.request(method, path, body=body)
        resp = conn.getresponse()
        return resp.status, resp.read()
    finally:
        conn.close()


def test_health(server, http_client):
    assert http_client.is_server_live()
    # Strict readiness: not every model loaded (no_version fails), so not ready.
    assert not http_client.is_server_ready()
    status, body = _get(server, "/v2/health/live")
    assert status == 200 and body == b""


def test_server_metadata(http_client):
    meta = http_client.get_server_metadata()
    assert meta["name"] == "triton"
    assert "binary_tensor_data" in meta["extensions"]
    assert isinstance(meta["version"], str)


def test_model_metadata_matches_triton_shape(http_client):
    meta = http_client.get_model_metadata("add_sub")
    assert meta == {
        "name": "add_sub",
        "versions": ["1"],
        "platform": "python",
        "inputs": [
            {"name": "INPUT0", "datatype": "FP32", "shape": [4]},
            {"name": "INPUT1", "datatype": "FP32", "shape": [4]},
        ],
        "outputs": [
            {"name": "OUTPUT0", "datatype": "FP32", "shape": [4]},
            {"name": "OUTPUT1", "datatype": "FP32", "shape": [4]},
        ],
    }
    batched = http_client.get_model_metadata("identity", "1")
    assert batched["inputs"] == [{"name": "INPUT0", "datatype": "FP32", "shape": [-1, -1]}]


def test_model_config_json(http_client):
    config = http_client.get_model_config("add_sub")
    assert config["name"] == "add_sub"
    assert config["backend"] == "python"
    assert config["max_batch_size"] == 0
    assert config["input"][0]["data_type"] == "TYPE_FP32"
    assert config["input"][0]["dims"] == [4]
    assert config["instance_group"][0]["name"] == "add_sub_0"
    assert config["instance_group"][0]["kind"] == "KIND_CPU"
    assert config["instance_group"][0]["count"] == 1
    assert config["version_policy"] == {"latest": {"num_versions": 1}}
    assert config["default_model_filename"] == "model.py"


def test_model_ready_routes(server, http_client):
    assert http_client.is_model_ready("add_sub")
    assert http_client.is_model_ready("add_sub", "1")
    assert not http_client.is_model_ready("add_sub", "2")
    status, _ = _get(server, "/v2/models/add_sub/ready")
    assert status == 200


@pytest.mark.parametrize(
    "path,status,message",
    [
        ("/v2/models/nope", 404, "Request for unknown model: 'nope' is not found"),
        ("/v2/models/add_sub/versions/2", 404, "Request for unknown model: 'add_sub' version 2 is not found"),
        ("/v2/models/nope/config", 404, "Request for unknown model: 'nope' is not found"),
        ("/v2/nothing/here", 404, "Not Found"),
    ],
)
def test_not_found(server, path, status, message):
    got_status, body = _get(server, path)
    assert got_status == status
    assert json.loads(body) == {"error": message}


def test_wrong_method_is_405(server):
    status, _ = _get(server, "/v2/models/add_sub/infer", method="GET")
    assert status == 405


def test_unparsable_json_is_400(server):
    status, body = _get(server, "/v2/models/add_sub/infer", method="POST", body=b"{bad json")
    assert status == 400
    assert "error" in json.loads(body)


def test_model_statistics_count_requests_and_executions(server, http_client):
    import numpy as np
    import tritonclient.http as httpclient

    before = http_client.get_inference_statistics("string_upper")["model_stats"][0]
    inp = httpclient.InferInput("TEXT", [1], "BYTES")
    inp.set_data_from_numpy(np.array([b"x"], dtype=np.object_))
    for _ in range(3):
        http_client.infer("string_upper", [inp])
    stats = http_client.get_inference_statistics("string_upper")["model_stats"]
    assert len(stats) == 1 and stats[0]["name"] == "string_upper" and stats[0]["version"] == "1"
    after = stats[0]
    assert after["inference_count"] - before["inference_count"] == 3
    assert after["execution_count"] - before["execution_count"] == 3
    success = after["inference_stats"]["success"]
    assert success["count"] - before["inference_stats"]["success"]["count"] == 3
    assert success["ns"] > 0
    assert after["inference_stats"]["compute_infer"]["count"] >= 3
    assert [b["batch_size"] for b in after["batch_stats"]] == [1]
    assert set(after) == {
        "name", "version", "last_inference", "inference_count", "execution_count",
        "inference_stats", "response_stats", "batch_stats", "memory_usage",
    }


def test_statistics_of_all_models_and_errors(server):
    status, body = _get(server, "/v2/models/stats")
    assert status == 200
    names = {s["name"] for s in json.loads(body)["model_stats"]}
    assert {"add_sub", "identity", "string_upper"} <= names
    status, body = _get(server, "/v2/models/nope/stats")
    assert (status, json.loads(body)) == (400, {"error": "requested model 'nope' is not available"})
    status, body = _get(server, "/v2/models/add_sub/versions/3/stats")
    assert status == 400
    assert json.loads(body) == {"error": "requested model version is not available for model 'add_sub'"}


@pytest.mark.parametrize(
    "body,headers,fragment",
    [
        (b"[" * 100_000 + b"]" * 100_000, {}, ""),
        (
            json.dumps({"inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": [2**62, 2**62],
                                    "parameters": {"binary_data_size": 16}}]}).encode() + b"\0" * 16,
            {"Inference-Header-Content-Length": None},
            "byte size mismatch",
        ),
        (b'{"inputs":[]}', {"Inference-Header-Content-Length": "9999"}, "inference header size"),
        (b'{"inputs":[]}', {"Inference-Header-Content-Length": "abc"}, "Inference-Header-Content-Length"),
    ],
    ids=["nested-100k", "overflowing-shape", "header-longer-than-body", "header-not-a-number"],
)
def test_hostile_requests_get_400_and_the_server_keeps_serving(server, http_client, body, headers, fragment):
    if "Inference-Header-Content-Length" in headers and headers["Inference-Header-Content-Length"] is None:
        headers = {"Inference-Header-Content-Length": str(len(body) - 16)}
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
    try:
        conn.request("POST", "/v2/models/add_sub/infer", body=body, headers=headers)
        resp = conn.getresponse()
        status, payload = resp.status, resp.read()
    finally:
        conn.close()
    assert status == 400
    assert fragment in json.loads(payload)["error"]
    assert http_client.is_server_live()
    assert http_client.is_model_ready("add_sub")
