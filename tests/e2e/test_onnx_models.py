"""ONNX models through a real server and tritonclient: Triton's onnxruntime auto-complete,
every datatype, dynamic batching, ensembles and BLS mixing Python and ONNX steps, session
parameters, and the errors for a missing extra or accelerator.

The models are built at test time with onnx.helper (tritium.testing.onnx_models).
"""

from __future__ import annotations

import concurrent.futures
import textwrap
from pathlib import Path

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

import tritonclient.grpc as grpcclient  # noqa: E402
import tritonclient.http as httpclient  # noqa: E402
from tritonclient.utils import InferenceServerException  # noqa: E402

from tritium.testing import ServerProcess  # noqa: E402
from tritium.testing import onnx_models as om  # noqa: E402
from tritium.testing.processes import child_pids  # noqa: E402

T = onnx.TensorProto
# Triton wire type -> (ONNX element, numpy dtype used by the client)
TYPES = {
    "BOOL": (T.BOOL, np.bool_),
    "UINT8": (T.UINT8, np.uint8),
    "UINT16": (T.UINT16, np.uint16),
    "UINT32": (T.UINT32, np.uint32),
    "UINT64": (T.UINT64, np.uint64),
    "INT8": (T.INT8, np.int8),
    "INT16": (T.INT16, np.int16),
    "INT32": (T.INT32, np.int32),
    "INT64": (T.INT64, np.int64),
    "FP16": (T.FLOAT16, np.float16),
    "FP32": (T.FLOAT, np.float32),
    "FP64": (T.DOUBLE, np.float64),
    "BYTES": (T.STRING, np.object_),
    "BF16": (T.BFLOAT16, None),
}
ONE = "instance_group [ { kind: KIND_CPU count: 1 } ]\n"

DOUBLE_PY = textwrap.dedent(
    """
    import numpy as np
    import triton_python_backend_utils as pb_utils

    class TritonPythonModel:
        def execute(self, requests):
            out = []
            for request in requests:
                x = pb_utils.get_input_tensor_by_name(request, "X").as_numpy()
                out.append(pb_utils.InferenceResponse([pb_utils.Tensor("Y", x * 2)]))
            return out
    """
)
BLS_PY = textwrap.dedent(
    """
    import triton_python_backend_utils as pb_utils

    class TritonPythonModel:
        def execute(self, requests):
            out = []
            for request in requests:
                x = pb_utils.get_input_tensor_by_name(request, "X")
                call = pb_utils.InferenceRequest(
                    model_name="scale3", requested_output_names=["Y"], inputs=[x]
                )
                answer = call.exec()
                if answer.has_error():
                    raise pb_utils.TritonModelException(answer.error().message())
                y = pb_utils.get_output_tensor_by_name(answer, "Y")
                out.append(pb_utils.InferenceResponse([pb_utils.Tensor("Y", y.as_numpy() + 1)]))
            return out
    """
)


def _all_types_model(types: list[str]) -> bytes:
    helper = onnx.helper
    nodes, inputs, outputs = [], [], []
    for wire in types:
        element = TYPES[wire][0]
        nodes.append(helper.make_node("Identity", [f"IN_{wire}"], [f"OUT_{wire}"]))
        inputs.append(om.tensor(f"IN_{wire}", element, ["N", 3]))
        outputs.append(om.tensor(f"OUT_{wire}", element, ["N", 3]))
    return om.graph_model(nodes, inputs, outputs)


def _with_default_bias() -> bytes:
    """``Y = X + BIAS``, BIAS an input with a default (an overridable initializer); fixed
    shapes, so the model does not batch and BIAS needs no batch dimension."""
    helper = onnx.helper
    bias = helper.make_tensor("BIAS", T.FLOAT, [4], [10.0] * 4)
    return om.graph_model(
        [helper.make_node("Add", ["X", "BIAS"], ["Y"])],
        [om.tensor("X", T.FLOAT, [1, 4]), om.tensor("BIAS", T.FLOAT, [4])],
        [om.tensor("Y", T.FLOAT, [1, 4])],
        [bias],
    )


def _python_model(repo: Path, name: str, source: str, config: str) -> None:
    (repo / name / "1").mkdir(parents=True)
    (repo / name / "1" / "model.py").write_text(source)
    (repo / name / "config.pbtxt").write_text(config)


def _scale_config(name: str, extra: str = "") -> str:
    return (
        f'name: "{name}" platform: "onnxruntime_onnx" max_batch_size: 8\n'
        'input [ { name: "X" data_type: TYPE_FP32 dims: [ 4 ] } ]\n'
        'output [ { name: "Y" data_type: TYPE_FP32 dims: [ 4 ] } ]\n' + ONE + extra
    )


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    repo = tmp_path_factory.mktemp("onnx_repo")
    # Only 1/model.onnx: backend, tensors and batching all come from the graph.
    om.write_model(repo, "add_sub_auto", om.add_sub())
    # BF16 passes to ORT only as ORT values, which cannot hold strings: two models.
    no_bf16 = [t for t in TYPES if t != "BF16"]
    om.write_model(repo, "all_types", _all_types_model(no_bf16), 'backend: "onnxruntime"\n' + ONE)
    om.write_model(repo, "bf16", _all_types_model(["BF16", "FP32"]), ONE)
    om.write_model(repo, "scalar", om.identity(T.FLOAT, ["N"]), ONE)
    om.write_model(
        repo,
        "fixed_batching",
        om.add_sub([2, 4]),
        'platform: "onnxruntime_onnx" max_batch_size: 8\n' + ONE,
    )
    om.write_model(
        repo,
        "wrong_type",
        om.add_sub(),
        'platform: "onnxruntime_onnx" max_batch_size: 4\n'
        'input [ { name: "INPUT0" data_type: TYPE_INT32 dims: [ 4 ] },'
        ' { name: "INPUT1" data_type: TYPE_FP32 dims: [ 4 ] } ]\n' + ONE,
    )
    om.write_directory_form(repo, "dir_form", om.scale(2.0), 'platform: "onnxruntime_onnx"\n' + ONE)
    om.write_model(
        repo,
        "named_file",
        om.scale(5.0).SerializeToString(),
        'backend: "onnxruntime" default_model_filename: "net.onnx"\n' + ONE,
        filename="net.onnx",
    )
    om.write_model(
        repo,
        "scale3",
        om.scale(3.0).SerializeToString(),
        _scale_config("scale3", "dynamic_batching { max_queue_delay_microseconds: 20000 }\n")
        + 'parameters { key: "intra_op_thread_count" value: { string_value: "1" } }\n'
        + 'parameters { key: "execution_mode" value: { string_value: "1" } }\n'
        + 'parameters { key: "inter_op_thread_count" value: { string_value: "2" } }\n'
        + "optimization { graph { level: 1 } }\n",
    )
    om.write_model(
        repo,
        "wants_openvino",
        om.scale(1.0).SerializeToString(),
        _scale_config(
            "wants_openvino",
            "optimization { execution_accelerators { cpu_execution_accelerator {"
            ' name: "openvino" } } }\n',
        ),
    )
    om.write_model(
        repo,
        "with_default",
        _with_default_bias(),
        'platform: "onnxruntime_onnx" max_batch_size: 0\n'
        'input [ { name: "X" data_type: TYPE_FP32 dims: [ 1, 4 ] },'
        ' { name: "BIAS" data_type: TYPE_FP32 dims: [ 4 ] optional: true } ]\n' + ONE,
    )
    _python_model(
        repo,
        "double",
        DOUBLE_PY,
        'name: "double" backend: "python" max_batch_size: 8\n'
        'input [ { name: "X" data_type: TYPE_FP32 dims: [ 4 ] } ]\n'
        'output [ { name: "Y" data_type: TYPE_FP32 dims: [ 4 ] } ]\n' + ONE,
    )
    _python_model(
        repo,
        "bls_to_onnx",
        BLS_PY,
        'name: "bls_to_onnx" backend: "python"\n'
        'input [ { name: "X" data_type: TYPE_FP32 dims: [ 1, 4 ] } ]\n'
        'output [ { name: "Y" data_type: TYPE_FP32 dims: [ 1, 4 ] } ]\n' + ONE,
    )
    (repo / "mixed" / "1").mkdir(parents=True)
    (repo / "mixed" / "config.pbtxt").write_text(
        'name: "mixed" platform: "ensemble" max_batch_size: 8\n'
        'input [ { name: "X" data_type: TYPE_FP32 dims: [ 4 ] } ]\n'
        'output [ { name: "Y" data_type: TYPE_FP32 dims: [ 4 ] } ]\n'
        "ensemble_scheduling { step [\n"
        '  { model_name: "double" model_version: -1 input_map { key: "X" value: "X" }'
        ' output_map { key: "Y" value: "twice" } },\n'
        '  { model_name: "scale3" model_version: -1 input_map { key: "X" value: "twice" }'
        ' output_map { key: "Y" value: "Y" } }\n'
        "] }\n"
    )
    return repo


@pytest.fixture(scope="module")
def onnx_server(repo: Path):
    args = ["--exit-on-error=false", "--backend-config=onnxruntime,default-max-batch-size=4"]
    with ServerProcess([repo], args, grpc=True, metrics=True) as server:
        yield server


@pytest.fixture(scope="module")
def client(onnx_server: ServerProcess):
    client = httpclient.InferenceServerClient(onnx_server.http_url, network_timeout=60)
    yield client
    client.close()


def _infer(client, model: str, inputs: dict, outputs: list[str]) -> list[np.ndarray]:
    items = []
    for name, (array, wire) in inputs.items():
        item = httpclient.InferInput(name, list(array.shape), wire)
        item.set_data_from_numpy(array, binary_data=True)
        items.append(item)
    result = client.infer(model, items)
    return [result.as_numpy(o) for o in outputs]


def test_a_folder_with_only_model_onnx_loads_auto_completed(client) -> None:
    config = client.get_model_config("add_sub_auto")
    assert (config["platform"], config["backend"]) == ("onnxruntime_onnx", "onnxruntime")
    assert config["default_model_filename"] == "model.onnx"
    assert config["max_batch_size"] == 4 and "dynamic_batching" in config
    assert [(i["name"], i["data_type"], i["dims"]) for i in config["input"]] == [
        ("INPUT0", "TYPE_FP32", [4]),
        ("INPUT1", "TYPE_FP32", [4]),
    ]
    # Triton gives onnxruntime CPU groups two instances.
    assert config["instance_group"][0]["count"] == 2
    metadata = client.get_model_metadata("add_sub_auto")
    assert metadata["platform"] == "onnxruntime_onnx"
    assert metadata["inputs"][0]["shape"] == [-1, 4]
    index = {m["name"]: m for m in client.get_model_repository_index()}
    assert index["add_sub_auto"]["state"] == "READY"
    a = np.arange(8, dtype=np.float32).reshape(2, 4)
    b = np.ones((2, 4), np.float32)
    out0, out1 = _infer(
        client,
        "add_sub_auto",
        {"INPUT0": (a, "FP32"), "INPUT1": (b, "FP32")},
        ["OUTPUT0", "OUTPUT1"],
    )
    np.testing.assert_array_equal(out0, a + b)
    np.testing.assert_array_equal(out1, a - b)


@pytest.mark.parametrize(
    ("model", "types"),
    [("all_types", [t for t in TYPES if t != "BF16"]), ("bf16", ["BF16", "FP32"])],
)
def test_every_datatype_round_trips(client, model: str, types: list[str]) -> None:
    import ml_dtypes

    inputs = {}
    expected = {}
    for wire in types:
        dtype = TYPES[wire][1]
        if wire == "BYTES":
            array = np.array([[b"a", b"bc", "é".encode()]], dtype=object)
        elif wire == "BF16":
            array = np.array([[1.0, -2.5, 3.0]], dtype=ml_dtypes.bfloat16)
        elif wire == "BOOL":
            array = np.array([[True, False, True]])
        else:
            array = np.array([[1, 2, 3]], dtype=dtype)
        inputs[f"IN_{wire}"] = (array, wire)
        expected[f"OUT_{wire}"] = array
    config = client.get_model_config(model)
    configured = {o["name"]: o["data_type"] for o in config["output"]}
    assert configured == {f"OUT_{t}": "TYPE_STRING" if t == "BYTES" else f"TYPE_{t}" for t in types}
    outputs = _infer(client, model, inputs, list(expected))
    for (name, want), got in zip(expected.items(), outputs):
        assert got.dtype == want.dtype, name
        np.testing.assert_array_equal(got, want, err_msg=name)


def test_scalar_per_item_is_dims_1_reshaped(client) -> None:
    config = client.get_model_config("scalar")
    assert config["input"][0]["dims"] == [1] and config["input"][0]["reshape"] == {"shape": []}
    x = np.array([[1.5], [2.5]], np.float32)
    (y,) = _infer(client, "scalar", {"X": (x, "FP32")}, ["Y"])
    np.testing.assert_array_equal(y, x)


def test_directory_form_and_default_model_filename(client) -> None:
    x = np.arange(4, dtype=np.float32).reshape(1, 4)
    (y,) = _infer(client, "dir_form", {"X": (x, "FP32")}, ["Y"])
    np.testing.assert_array_equal(y, x * 2)
    (y,) = _infer(client, "named_file", {"X": (x, "FP32")}, ["Y"])
    np.testing.assert_array_equal(y, x * 5)


def test_contradicting_configs_fail_naming_the_tensor(client) -> None:
    index = {m["name"]: m for m in client.get_model_repository_index()}
    assert index["fixed_batching"]["state"] == "UNAVAILABLE"
    assert (
        "model does not support batching while non-zero max_batch_size"
        in (index["fixed_batching"]["reason"])
    )
    assert index["wrong_type"]["state"] == "UNAVAILABLE"
    assert (
        "unexpected datatype TYPE_INT32 for inference input 'INPUT0'"
        in (index["wrong_type"]["reason"])
    )


def test_missing_accelerator_fails_the_load_instead_of_running_on_cpu(client) -> None:
    index = {m["name"]: m for m in client.get_model_repository_index()}
    assert index["wants_openvino"]["state"] == "UNAVAILABLE"
    reason = index["wants_openvino"]["reason"]
    assert "OpenVINOExecutionProvider" in reason and "tritium[onnxruntime-openvino]" in reason


def test_concurrent_requests_are_batched_into_one_run(onnx_server, client) -> None:
    before = client.get_inference_statistics("scale3")["model_stats"][0]

    def call(value: int) -> np.ndarray:
        own = httpclient.InferenceServerClient(onnx_server.http_url, network_timeout=60)
        try:
            x = np.full((1, 4), value, np.float32)
            return _infer(own, "scale3", {"X": (x, "FP32")}, ["Y"])[0]
        finally:
            own.close()

    n = 16
    with concurrent.futures.ThreadPoolExecutor(n) as pool:
        results = list(pool.map(call, range(n)))
    for value, y in enumerate(results):
        np.testing.assert_array_equal(y, np.full((1, 4), value * 3, np.float32))
    after = client.get_inference_statistics("scale3")["model_stats"][0]
    assert after["inference_count"] - before["inference_count"] == n
    assert after["execution_count"] - before["execution_count"] < n
    assert max(int(b["batch_size"]) for b in after["batch_stats"]) > 1


def test_statistics_and_metrics_count_onnx_models(onnx_server, client) -> None:
    import re
    import urllib.request

    x = np.ones((1, 4), np.float32)
    for _ in range(3):
        _infer(client, "dir_form", {"X": (x, "FP32")}, ["Y"])
    stats = client.get_inference_statistics("dir_form")["model_stats"][0]
    assert stats["inference_count"] >= 3
    assert stats["inference_stats"]["compute_infer"]["count"] >= 1
    with urllib.request.urlopen(onnx_server.metrics_url, timeout=30) as answer:
        text = answer.read().decode()
    found = re.search(r'nv_inference_count\{model="dir_form",version="1"\} (\d+)', text)
    assert found is not None and int(found.group(1)) >= 3, text[:2000]


def test_session_parameters_reach_the_session(onnx_server) -> None:
    assert onnx_server.wait_for_log(
        r"onnxruntime session for 'scale3_0_0': intra_op_thread_count=1 "
        r"inter_op_thread_count=2 execution_mode=parallel graph_optimization=ORT_ENABLE_EXTENDED"
    ), onnx_server.log[-3000:]


def test_ensemble_mixing_python_and_onnx_steps(client) -> None:
    x = np.arange(8, dtype=np.float32).reshape(2, 4)
    (y,) = _infer(client, "mixed", {"X": (x, "FP32")}, ["Y"])
    np.testing.assert_array_equal(y, x * 6)


def test_bls_from_python_into_onnx(client) -> None:
    x = np.arange(4, dtype=np.float32).reshape(1, 4)
    (y,) = _infer(client, "bls_to_onnx", {"X": (x, "FP32")}, ["Y"])
    np.testing.assert_array_equal(y, x * 3 + 1)


def test_grpc_infer_and_config(onnx_server) -> None:
    client = grpcclient.InferenceServerClient(onnx_server.grpc_url)
    try:
        config = client.get_model_config("add_sub_auto", as_json=True)["config"]
        assert config["platform"] == "onnxruntime_onnx"
        a = np.ones((1, 4), np.float32)
        items = []
        for name in ("INPUT0", "INPUT1"):
            item = grpcclient.InferInput(name, [1, 4], "FP32")
            item.set_data_from_numpy(a)
            items.append(item)
        result = client.infer("add_sub_auto", items)
        np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), a * 2)
    finally:
        client.close()


def test_bad_input_is_a_per_request_error(client) -> None:
    x = np.ones((1, 5), np.float32)
    item = httpclient.InferInput("X", [1, 5], "FP32")
    item.set_data_from_numpy(x)
    with pytest.raises(InferenceServerException):
        client.infer("scale3", [item])
    (y,) = _infer(client, "scale3", {"X": (np.ones((1, 4), np.float32), "FP32")}, ["Y"])
    np.testing.assert_array_equal(y, np.full((1, 4), 3, np.float32))


def test_without_the_extra_a_model_fails_with_the_install_hint(tmp_path: Path) -> None:
    # onnxruntime made unimportable for the server and its workers.
    blocker = tmp_path / "blocker"
    blocker.mkdir()
    (blocker / "onnxruntime.py").write_text("raise ImportError('blocked for the test')\n")
    repo = tmp_path / "repo"
    om.write_model(repo, "m", om.add_sub(), 'platform: "onnxruntime_onnx"\n' + ONE)
    import os

    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(blocker), env.get("PYTHONPATH", "")])
    with ServerProcess([repo], ["--exit-on-error=false"], env=env) as server:
        client = httpclient.InferenceServerClient(server.http_url)
        try:
            (entry,) = client.get_model_repository_index()
        finally:
            client.close()
    assert entry["state"] == "UNAVAILABLE"
    assert entry["reason"] == (
        "backend 'onnxruntime' is not installed: pip install 'tritium[onnxruntime]'"
    )


def test_warm_up_and_restart_after_a_crash(tmp_path: Path) -> None:
    import os
    import signal
    import time

    repo = tmp_path / "repo"
    om.write_model(
        repo,
        "m",
        om.scale(2.0).SerializeToString(),
        'platform: "onnxruntime_onnx"\n'
        + ONE
        + 'model_warmup [ { name: "zeros" batch_size: 2 inputs { key: "X" value: {'
        " data_type: TYPE_FP32 dims: [ 4 ] zero_data: true } } } ]\n",
    )
    x = np.ones((1, 4), np.float32)
    with ServerProcess([repo]) as server:
        client = httpclient.InferenceServerClient(server.http_url, network_timeout=60)
        try:
            np.testing.assert_array_equal(_infer(client, "m", {"X": (x, "FP32")}, ["Y"])[0], x * 2)
            assert server.proc is not None
            (worker,) = child_pids(server.proc.pid)
            os.kill(worker, signal.SIGKILL)
            deadline = time.monotonic() + 60
            while True:
                try:
                    (y,) = _infer(client, "m", {"X": (x, "FP32")}, ["Y"])
                    break
                except InferenceServerException:
                    assert time.monotonic() < deadline, server.log[-3000:]
                    time.sleep(0.2)
            np.testing.assert_array_equal(y, x * 2)
            assert child_pids(server.proc.pid) not in ([], [worker])
        finally:
            client.close()


def test_optional_input_with_a_default(client) -> None:
    x = np.ones((1, 4), np.float32)
    (y,) = _infer(client, "with_default", {"X": (x, "FP32")}, ["Y"])
    np.testing.assert_array_equal(y, x + 10)
    bias = np.arange(4, dtype=np.float32)
    (y,) = _infer(client, "with_default", {"X": (x, "FP32"), "BIAS": (bias, "FP32")}, ["Y"])
    np.testing.assert_array_equal(y, x + bias)


def test_reload_with_a_new_config_builds_new_sessions(tmp_path: Path) -> None:
    import json

    repo = tmp_path / "repo"
    om.write_model(
        repo, "m", om.scale(2.0).SerializeToString(), 'platform: "onnxruntime_onnx"\n' + ONE
    )
    x = np.ones((1, 4), np.float32)
    args = ["--model-control-mode=explicit", "--load-model=m"]
    with ServerProcess([repo], args) as server:
        client = httpclient.InferenceServerClient(server.http_url, network_timeout=60)
        try:
            np.testing.assert_array_equal(_infer(client, "m", {"X": (x, "FP32")}, ["Y"])[0], x * 2)
            override = {
                "platform": "onnxruntime_onnx",
                "instance_group": [{"kind": "KIND_CPU", "count": 1}],
                "parameters": {"intra_op_thread_count": {"string_value": "1"}},
                "optimization": {"graph": {"level": -1}},
            }
            client.load_model("m", config=json.dumps(override))
            assert server.wait_for_log(
                r"onnxruntime session for 'm_0_0': intra_op_thread_count=1 .*ORT_ENABLE_BASIC"
            ), server.log[-3000:]
            config = client.get_model_config("m")
            assert config["optimization"]["graph"]["level"] == -1
            assert config["max_batch_size"] == 4  # auto-completed again from the graph
            np.testing.assert_array_equal(_infer(client, "m", {"X": (x, "FP32")}, ["Y"])[0], x * 2)
        finally:
            client.close()
