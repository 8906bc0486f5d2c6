"""The response cache in a real server, through tritonclient (HTTP and gRPC).

One server with ``--cache-config local,size=N``: hits echo the new request's id, JSON,
binary and gRPC requests with the same values share an entry, hits count as Triton counts
them (statistics and ``/metrics``), errors are not kept, identical requests in flight run
once, an ensemble is answered at the top level, a repeated request is replayed and counted
as a hit, and a reload drops the version's entries.
"""

from __future__ import annotations

import http.client as http_client
import json
import urllib.request
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from tritium.testing import ServerProcess

from .conftest import EXAMPLE_MODELS, TEST_MODELS

MODELS = ("cached_sleeper", "add_sub", "cached_ensemble")


@pytest.fixture(scope="module")
def server() -> Iterator[ServerProcess]:
    args = [
        "--model-control-mode=explicit",
        *(f"--load-model={m}" for m in MODELS),
        "--cache-config=local,size=1048576",
    ]
    with ServerProcess([TEST_MODELS, EXAMPLE_MODELS], args, grpc=True, metrics=True) as s:
        yield s


@pytest.fixture(scope="module")
def http(server: ServerProcess) -> Iterator[httpclient.InferenceServerClient]:
    with httpclient.InferenceServerClient(server.http_url, concurrency=8) as client:
        yield client


@pytest.fixture(scope="module")
def grpc(server: ServerProcess) -> Iterator[grpcclient.InferenceServerClient]:
    with grpcclient.InferenceServerClient(server.grpc_url) as client:
        yield client


def _inputs(module: Any, ms: int, data: list[float], binary: bool = True) -> list[Any]:
    ms_in = module.InferInput("MS", [1], "INT32")
    data_in = module.InferInput("DATA", [len(data)], "FP32")
    arrays = (np.array([ms], np.int32), np.array(data, np.float32))
    if module is httpclient:
        ms_in.set_data_from_numpy(arrays[0], binary_data=binary)
        data_in.set_data_from_numpy(arrays[1], binary_data=binary)
    else:
        ms_in.set_data_from_numpy(arrays[0])
        data_in.set_data_from_numpy(arrays[1])
    return [ms_in, data_in]


def _stats(http: httpclient.InferenceServerClient, model: str) -> dict[str, Any]:
    return http.get_inference_statistics(model)["model_stats"][0]


def _metrics(server: ServerProcess) -> dict[str, float]:
    with urllib.request.urlopen(server.metrics_url, timeout=10) as reply:
        text = reply.read().decode()
    values = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, _, value = line.rpartition(" ")
            values[name] = float(value)
    return values


def test_hit_echoes_id_and_is_shared_by_json_binary_and_grpc(
    http: httpclient.InferenceServerClient, grpc: grpcclient.InferenceServerClient
) -> None:
    before = _stats(http, "cached_sleeper")
    first = http.infer("cached_sleeper", _inputs(httpclient, 1, [1.0, 2.0]), request_id="a")
    run = first.as_numpy("RUN")[0]
    json_hit = http.infer(
        "cached_sleeper", _inputs(httpclient, 1, [1.0, 2.0], binary=False), request_id="b"
    )
    grpc_hit = grpc.infer("cached_sleeper", _inputs(grpcclient, 1, [1.0, 2.0]), request_id="c")
    assert json_hit.get_response()["id"] == "b"
    assert grpc_hit.get_response().id == "c"
    for hit in (json_hit, grpc_hit):
        assert hit.as_numpy("RUN")[0] == run  # the model did not run again
        assert hit.as_numpy("OUT").tolist() == [1.0, 2.0]
    after = _stats(http, "cached_sleeper")
    assert after["execution_count"] - before["execution_count"] == 1
    inference, was = after["inference_stats"], before["inference_stats"]
    assert inference["cache_hit"]["count"] - was["cache_hit"]["count"] == 2
    assert inference["cache_miss"]["count"] - was["cache_miss"]["count"] == 1
    assert inference["success"]["count"] - was["success"]["count"] == 3
    assert inference["queue"]["count"] - was["queue"]["count"] == 3
    assert inference["compute_infer"]["count"] - was["compute_infer"]["count"] == 1


def test_hit_answers_the_outputs_asked_for(http: httpclient.InferenceServerClient) -> None:
    http.infer("cached_sleeper", _inputs(httpclient, 1, [3.0]))
    only_run = http.infer(
        "cached_sleeper",
        _inputs(httpclient, 1, [3.0]),
        outputs=[httpclient.InferRequestedOutput("RUN")],
    )
    assert [o["name"] for o in only_run.get_response()["outputs"]] == ["RUN"]


def test_errors_are_not_cached(http: httpclient.InferenceServerClient) -> None:
    before = _stats(http, "cached_sleeper")["inference_stats"]
    for _ in range(2):
        with pytest.raises(InferenceServerException, match="negative MS"):
            http.infer("cached_sleeper", _inputs(httpclient, -1, [7.0]))
    after = _stats(http, "cached_sleeper")["inference_stats"]
    assert after["cache_hit"]["count"] == before["cache_hit"]["count"]
    assert after["fail"]["count"] - before["fail"]["count"] == 2


def test_identical_requests_in_flight_run_once(http: httpclient.InferenceServerClient) -> None:
    before = _stats(http, "cached_sleeper")["execution_count"]
    calls = [
        http.async_infer("cached_sleeper", _inputs(httpclient, 300, [9.0]), request_id=str(i))
        for i in range(6)
    ]
    results = [call.get_result() for call in calls]
    assert [r.get_response()["id"] for r in results] == [str(i) for i in range(6)]
    assert len({int(r.as_numpy("RUN")[0]) for r in results}) == 1
    assert _stats(http, "cached_sleeper")["execution_count"] - before == 1


def test_ensemble_is_answered_at_the_top(http: httpclient.InferenceServerClient) -> None:
    a = httpclient.InferInput("A", [4], "FP32")
    b = httpclient.InferInput("B", [4], "FP32")
    a.set_data_from_numpy(np.arange(4, dtype=np.float32))
    b.set_data_from_numpy(np.ones(4, np.float32))
    steps_before = _stats(http, "add_sub")["inference_stats"]["success"]["count"]
    for _ in range(3):
        result = http.infer("cached_ensemble", [a, b])
        assert result.as_numpy("SUM").tolist() == [1.0, 2.0, 3.0, 4.0]
    assert _stats(http, "add_sub")["inference_stats"]["success"]["count"] - steps_before == 1
    stats = _stats(http, "cached_ensemble")["inference_stats"]
    assert (stats["cache_hit"]["count"], stats["cache_miss"]["count"]) == (2, 1)


def test_models_without_the_cache_report_zeros(http: httpclient.InferenceServerClient) -> None:
    a = httpclient.InferInput("INPUT0", [4], "FP32")
    b = httpclient.InferInput("INPUT1", [4], "FP32")
    a.set_data_from_numpy(np.ones(4, np.float32))
    b.set_data_from_numpy(np.ones(4, np.float32))
    http.infer("add_sub", [a, b])
    http.infer("add_sub", [a, b])
    stats = _stats(http, "add_sub")["inference_stats"]
    assert stats["cache_hit"] == {"count": 0, "ns": 0}
    assert stats["cache_miss"] == {"count": 0, "ns": 0}


def test_metrics(server: ServerProcess, http: httpclient.InferenceServerClient) -> None:
    http.infer("cached_sleeper", _inputs(httpclient, 1, [11.0]))
    before = _metrics(server)
    http.infer("cached_sleeper", _inputs(httpclient, 1, [11.0]))
    after = _metrics(server)
    labels = '{model="cached_sleeper",version="1"}'

    def delta(name: str) -> float:
        return after[name] - before[name]

    assert delta(f"nv_cache_num_hits_per_model{labels}") == 1
    assert delta(f"nv_cache_num_misses_per_model{labels}") == 0
    assert delta(f"nv_inference_request_success{labels}") == 1
    assert delta(f"nv_inference_count{labels}") == 0
    assert delta(f"nv_inference_exec_count{labels}") == 0
    assert delta("nv_cache_num_hits") == 1 and delta("nv_cache_num_lookups") == 1
    assert after["nv_cache_num_entries"] >= 1
    assert 0 < after["nv_cache_util"] <= 1
    for name in ("nv_cache_num_misses", "nv_cache_num_evictions", "nv_cache_lookup_duration"):
        assert name in after
    assert "nv_cache_insertion_duration" in after
    assert "nv_cache_hit_duration_per_model" + labels in after
    assert "nv_cache_miss_duration_per_model" + labels in after
    # Per-model cache families only for models with the cache on.
    assert 'nv_cache_num_hits_per_model{model="add_sub",version="1"}' not in after


def _raw_http(server: ServerProcess, body: bytes, header_length: int | None) -> tuple:
    """(status, Inference-Header-Content-Length, body) of one POST, as bytes on the wire."""
    connection = http_client.HTTPConnection(server.http_url, timeout=30)
    headers = {"Content-Type": "application/octet-stream"}
    if header_length is not None:
        headers["Inference-Header-Content-Length"] = str(header_length)
    try:
        connection.request("POST", "/v2/models/cached_sleeper/infer", body, headers)
        reply = connection.getresponse()
        return reply.status, reply.getheader("Inference-Header-Content-Length"), reply.read()
    finally:
        connection.close()


@pytest.mark.parametrize("binary", [False, True])
@pytest.mark.parametrize("outputs", [None, ["OUT"], ["RUN", "OUT"]])
def test_hits_answer_the_bytes_of_the_miss_over_http(
    server: ServerProcess, binary: bool, outputs: list[str] | None
) -> None:
    # Values of this test alone: the first request is the miss.
    data = [float(len(outputs or ())), 505.5 + binary]
    doc: dict[str, Any] = {
        "id": "first",
        "inputs": [
            {"name": "MS", "datatype": "INT32", "shape": [1], "data": [0]},
            {"name": "DATA", "datatype": "FP32", "shape": [2], "data": data},
        ],
    }
    if binary:
        doc["parameters"] = {"binary_data_output": True}
    if outputs is not None:
        doc["outputs"] = [{"name": name} for name in outputs]
    miss = _raw_http(server, json.dumps(doc).encode(), None)
    assert miss[0] == 200
    for _ in range(2):  # the first hit encodes, the next reuses
        assert _raw_http(server, json.dumps(doc).encode(), None) == miss
    doc["id"] = "a-second-id"
    status, length, body = _raw_http(server, json.dumps(doc).encode(), None)
    assert status == 200
    assert body == miss[2].replace(b'"id":"first"', b'"id":"a-second-id"', 1)
    if miss[1] is None:  # outputs named without binary_data: JSON whatever the default
        assert length is None
    else:
        assert int(length) == int(miss[1]) + len("a-second-id") - len("first")
    del doc["id"]
    status, length, body = _raw_http(server, json.dumps(doc).encode(), None)
    assert body == miss[2].replace(b'"id":"first",', b"", 1)


def test_hits_answer_the_bytes_of_the_miss_over_grpc(server: ServerProcess) -> None:
    _check_grpc_hit_bytes(server.grpc_url)


def test_hits_answer_the_bytes_of_the_miss_over_grpcio() -> None:
    args = [
        "--model-control-mode=explicit",
        "--load-model=cached_sleeper",
        "--cache-config=local,size=1048576",
        "--grpc-implementation=grpcio",
    ]
    with ServerProcess([TEST_MODELS], args, grpc=True) as grpcio_server:
        _check_grpc_hit_bytes(grpcio_server.grpc_url)


def _check_grpc_hit_bytes(url: str) -> None:
    import grpc as grpc_lib
    from tritonclient.grpc import service_pb2

    request = service_pb2.ModelInferRequest(model_name="cached_sleeper", id="g1")
    for name, datatype, array in (
        ("MS", "INT32", np.array([0], np.int32)),
        ("DATA", "FP32", np.array([606.5, 1.0], np.float32)),
    ):
        request.inputs.add(name=name, datatype=datatype, shape=list(array.shape))
        request.raw_input_contents.append(array.tobytes())
    with grpc_lib.insecure_channel(url) as channel:
        call = channel.unary_unary("/inference.GRPCInferenceService/ModelInfer")
        miss = call(request.SerializeToString(), timeout=30)
        assert call(request.SerializeToString(), timeout=30) == miss
        assert call(request.SerializeToString(), timeout=30) == miss
        request.id = ""
        expected = service_pb2.ModelInferResponse.FromString(miss)
        expected.id = ""
        assert call(request.SerializeToString(), timeout=30) == expected.SerializeToString()


def test_replayed_hits_count_as_hits_and_answer_each_id(
    server: ServerProcess, http: httpclient.InferenceServerClient
) -> None:
    """Requests byte for byte like an earlier hit (less their ids) are answered without
    being decoded: each with its own id, counted exactly as hits are."""
    inputs = _inputs(httpclient, 0, [77.0, 78.0])
    first = http.infer("cached_sleeper", inputs, request_id="r0")  # the miss
    http.infer("cached_sleeper", inputs, request_id="r1")  # a hit: filed as a replay
    before, metrics_before = _stats(http, "cached_sleeper"), _metrics(server)
    for i in range(2, 12):
        again = http.infer("cached_sleeper", inputs, request_id=f"r{i}")
        assert again.get_response()["id"] == f"r{i}"
        for name in ("RUN", "OUT"):
            assert np.array_equal(again.as_numpy(name), first.as_numpy(name))
    unnamed = http.infer("cached_sleeper", inputs)
    assert "id" not in unnamed.get_response()
    after, metrics_after = _stats(http, "cached_sleeper"), _metrics(server)
    for field in ("cache_hit", "success", "queue"):
        assert (
            after["inference_stats"][field]["count"] - before["inference_stats"][field]["count"]
            == 11
        )
    assert after["inference_stats"]["cache_miss"] == before["inference_stats"]["cache_miss"]
    assert after["inference_count"] == before["inference_count"]
    assert after["execution_count"] == before["execution_count"]
    labels = '{model="cached_sleeper",version="1"}'
    for name in (
        f"nv_cache_num_hits_per_model{labels}",
        "nv_cache_num_hits",
        "nv_cache_num_lookups",
    ):
        assert metrics_after[name] - metrics_before[name] == 11


def test_replayed_grpc_hits_count_as_hits_and_answer_each_id(
    server: ServerProcess,
    http: httpclient.InferenceServerClient,
    grpc: grpcclient.InferenceServerClient,
) -> None:
    inputs = _inputs(grpcclient, 0, [87.0, 88.0])
    first = grpc.infer("cached_sleeper", inputs, request_id="g0")  # the miss
    grpc.infer("cached_sleeper", inputs, request_id="g1")  # a hit: filed as a replay
    before = _stats(http, "cached_sleeper")
    for i in range(2, 12):
        again = grpc.infer("cached_sleeper", inputs, request_id=f"g{i}")
        assert again.get_response().id == f"g{i}"
        for name in ("RUN", "OUT"):
            assert np.array_equal(again.as_numpy(name), first.as_numpy(name))
    assert grpc.infer("cached_sleeper", inputs).get_response().id == ""
    after = _stats(http, "cached_sleeper")
    for field in ("cache_hit", "success", "queue"):
        assert after["inference_stats"][field]["count"] - before["inference_stats"][field]["count"] == 11
    assert after["inference_stats"]["cache_miss"] == before["inference_stats"]["cache_miss"]
    assert after["execution_count"] == before["execution_count"]


def test_reload_drops_the_versions_entries(
    server: ServerProcess, http: httpclient.InferenceServerClient
) -> None:
    first = http.infer("cached_sleeper", _inputs(httpclient, 1, [42.0]))
    for _ in range(2):  # hits: the second one is a replay
        http.infer("cached_sleeper", _inputs(httpclient, 1, [42.0]))
    entries = _metrics(server)["nv_cache_num_entries"]
    http.unload_model("cached_sleeper")
    assert _metrics(server)["nv_cache_num_entries"] < entries
    http.load_model("cached_sleeper")
    again = http.infer("cached_sleeper", _inputs(httpclient, 1, [42.0]))
    # A new load runs the model again (its instances count from 1 once more).
    assert again.as_numpy("RUN")[0] <= first.as_numpy("RUN")[0]
    stats = _stats(http, "cached_sleeper")["inference_stats"]
    assert stats["cache_miss"]["count"] == 1


def test_cache_config_is_reported_in_the_model_config(
    server: ServerProcess,
) -> None:
    url = f"{server.http_url}/v2/models/cached_sleeper/config"
    with urllib.request.urlopen(f"http://{url}", timeout=10) as reply:
        config = json.loads(reply.read())
    assert config["response_cache"] == {"enable": True}
