"""OpenVINO models through a real server and tritonclient: auto-complete, inference over
HTTP and gRPC, batching, and a device per instance (``tritium.device_ids``).

The models are ONNX graphs converted to OpenVINO IR at test time. openvino is not in the
``test`` extra (a 59 MB wheel, 180 MB installed): without it these tests are skipped.
"""

from __future__ import annotations

import concurrent.futures

import numpy as np
import pytest

pytest.importorskip("onnx")
pytest.importorskip(
    "openvino",
    reason="openvino is not installed (pip install 'tritium[openvino]')",
)

import tritonclient.grpc as grpcclient  # noqa: E402
import tritonclient.http as httpclient  # noqa: E402

from tritium.testing import ServerProcess  # noqa: E402
from tritium.testing import onnx_models as om  # noqa: E402
from tritium.testing.openvino_models import write_openvino_model  # noqa: E402

CONFIG = (
    'backend: "openvino"\n'
    "dynamic_batching { max_queue_delay_microseconds: 20000 }\n"
    "instance_group [ { kind: KIND_CPU count: 2 } ]\n"
    'parameters { key: "tritium.device_ids" value: { string_value: "0,1" } }\n'
    'parameters { key: "PERFORMANCE_HINT" value: { string_value: "LATENCY" } }\n'
)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory):
    repo = tmp_path_factory.mktemp("openvino_repo")
    write_openvino_model(repo, "add_sub_ov", om.add_sub(), CONFIG)
    with ServerProcess([repo], ["--exit-on-error=false"], grpc=True) as running:
        yield running


def _inputs(rows: int, value: float) -> list[httpclient.InferInput]:
    items = []
    for name, array in (
        ("INPUT0", np.full((rows, 4), value, np.float32)),
        ("INPUT1", np.ones((rows, 4), np.float32)),
    ):
        item = httpclient.InferInput(name, list(array.shape), "FP32")
        item.set_data_from_numpy(array, binary_data=True)
        items.append(item)
    return items


def test_config_metadata_and_http_infer(server: ServerProcess) -> None:
    client = httpclient.InferenceServerClient(server.http_url, network_timeout=60)
    try:
        config = client.get_model_config("add_sub_ov")
        assert config["backend"] == "openvino" and config["max_batch_size"] == 4
        assert [i["name"] for i in config["input"]] == ["INPUT0", "INPUT1"]
        result = client.infer("add_sub_ov", _inputs(2, 3.0))
        np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), np.full((2, 4), 4.0))
        np.testing.assert_array_equal(result.as_numpy("OUTPUT1"), np.full((2, 4), 2.0))
    finally:
        client.close()


def test_grpc_infer(server: ServerProcess) -> None:
    client = grpcclient.InferenceServerClient(server.grpc_url)
    try:
        items = []
        for name in ("INPUT0", "INPUT1"):
            item = grpcclient.InferInput(name, [1, 4], "FP32")
            item.set_data_from_numpy(np.full((1, 4), 2.0, np.float32))
            items.append(item)
        result = client.infer("add_sub_ov", items)
        np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), np.full((1, 4), 4.0))
    finally:
        client.close()


def test_concurrent_requests_are_answered_and_batched(server: ServerProcess) -> None:
    def call(value: int) -> np.ndarray:
        own = httpclient.InferenceServerClient(server.http_url, network_timeout=60)
        try:
            return own.infer("add_sub_ov", _inputs(1, float(value))).as_numpy("OUTPUT0")
        finally:
            own.close()

    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        results = list(pool.map(call, range(16)))
    for value, y in enumerate(results):
        np.testing.assert_array_equal(y, np.full((1, 4), value + 1.0, np.float32))
    client = httpclient.InferenceServerClient(server.http_url, network_timeout=60)
    try:
        stats = client.get_inference_statistics("add_sub_ov")["model_stats"][0]
    finally:
        client.close()
    assert stats["inference_count"] >= 16
    assert stats["execution_count"] <= stats["inference_count"]


def test_instances_are_compiled_on_their_devices_and_logged(server: ServerProcess) -> None:
    assert server.wait_for_log(
        r"TRITONBACKEND_ModelInstanceInitialize: add_sub_ov_0_1 \(CPU device 1\)"
    ), server.log[-3000:]
    assert server.wait_for_log(
        r"openvino model for 'add_sub_ov_0_0' compiled for CPU: INFERENCE_NUM_THREADS=\d+ "
        r"INFERENCE_PRECISION_HINT=f32 PERFORMANCE_HINT=LATENCY"
    ), server.log[-3000:]
