"""An ONNX model under sequence batching through a real server and tritonclient: the
sequence batcher's START control and implicit state reach onnxruntime (and OpenVINO, where
installed) as graph inputs, the state output comes back from it, and each sequence keeps
its own state."""

from __future__ import annotations

import importlib.util
import threading
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

import tritonclient.grpc as grpcclient  # noqa: E402
import tritonclient.http as httpclient  # noqa: E402

from tritium.testing import ServerProcess  # noqa: E402
from tritium.testing import onnx_models as om  # noqa: E402

OPENVINO = importlib.util.find_spec("openvino") is not None

SEQUENCE = (
    "sequence_batching {\n"
    "  max_sequence_idle_microseconds: 10000000\n"
    '  control_input [ { name: "START" control [ { kind: CONTROL_SEQUENCE_START'
    " fp32_false_true: [ 0, 1 ] } ] } ]\n"
    '  state [ { input_name: "STATE_IN" output_name: "STATE_OUT" data_type: TYPE_FP32'
    " dims: [ 1 ] initial_state: { data_type: TYPE_FP32 dims: [ 1 ] zero_data: true"
    ' name: "zero" } } ]\n'
    "}\n"
)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory):
    repo: Path = tmp_path_factory.mktemp("onnx_sequences")
    # Written in full: inputs and outputs without the sequence batcher's tensors.
    om.write_model(
        repo,
        "acc",
        om.accumulator(),
        'platform: "onnxruntime_onnx" max_batch_size: 8\n'
        'input [ { name: "INPUT" data_type: TYPE_FP32 dims: [ 1 ] } ]\n'
        'output [ { name: "OUTPUT" data_type: TYPE_FP32 dims: [ 1 ] } ]\n'
        + SEQUENCE
        + "instance_group [ { kind: KIND_CPU count: 1 } ]\n",
    )
    # Only the sequence batching: the rest comes from the graph.
    om.write_model(repo, "acc_auto", om.accumulator(), SEQUENCE)
    # Several sequences' requests joined into one run (their states too).
    om.write_model(
        repo,
        "acc_oldest",
        om.accumulator(),
        SEQUENCE.replace(
            "sequence_batching {\n",
            "sequence_batching {\n  oldest { max_candidate_sequences: 8"
            " max_queue_delay_microseconds: 2000 }\n",
        ),
    )
    # A control input the graph does not have.
    om.write_model(
        repo, "no_such_control", om.accumulator(), SEQUENCE.replace('"START"', '"BEGIN"')
    )
    if OPENVINO:
        from tritium.testing.openvino_models import write_openvino_model

        write_openvino_model(
            repo, "acc_openvino", om.accumulator(), 'backend: "openvino"\n' + SEQUENCE
        )
    with ServerProcess([repo], ["--exit-on-error=false"], grpc=True) as server:
        yield server


def _step(client, module, model: str, sequence: int, value: float, start: bool, end: bool):  # noqa: ANN001
    item = module.InferInput("INPUT", [1, 1], "FP32")
    item.set_data_from_numpy(np.array([[value]], dtype=np.float32))
    result = client.infer(
        model, [item], sequence_id=sequence, sequence_start=start, sequence_end=end
    )
    return float(result.as_numpy("OUTPUT")[0, 0])


@pytest.mark.parametrize(
    "model",
    [
        "acc",
        "acc_auto",
        pytest.param(
            "acc_openvino",
            marks=pytest.mark.skipif(not OPENVINO, reason="openvino is not installed"),
        ),
    ],
)
def test_interleaved_sequences_keep_their_own_state(server: ServerProcess, model: str) -> None:
    http = httpclient.InferenceServerClient(server.http_url)
    grpc = grpcclient.InferenceServerClient(server.grpc_url)
    sums: dict[int, list[float]] = {7: [], 8: []}
    values = {7: [1.0, 2.0, 3.0, 4.0], 8: [10.0, 20.0, 30.0, 40.0]}
    for i in range(4):
        for sequence, (client, module) in ((7, (http, httpclient)), (8, (grpc, grpcclient))):
            sums[sequence].append(
                _step(client, module, model, sequence, values[sequence][i], i == 0, i == 3)
            )
    # START adds 100 on the first request; the state carries the running sum after it.
    assert sums == {7: [101.0, 103.0, 106.0, 110.0], 8: [110.0, 130.0, 160.0, 200.0]}
    # A new sequence on a freed id starts again from the initial (zero) state.
    assert _step(grpc, grpcclient, model, 7, 5.0, True, True) == 105.0
    http.close()
    grpc.close()


def test_auto_complete_shows_only_the_clients_tensors(server: ServerProcess) -> None:
    client = httpclient.InferenceServerClient(server.http_url)
    config = client.get_model_config("acc_auto")
    client.close()
    assert config["platform"] == "onnxruntime_onnx"
    assert [i["name"] for i in config["input"]] == ["INPUT"]
    assert [o["name"] for o in config["output"]] == ["OUTPUT"]
    assert config["max_batch_size"] == 4 and "dynamic_batching" not in config


def test_a_control_input_the_graph_lacks_fails_the_load_with_its_name(
    server: ServerProcess,
) -> None:
    client = httpclient.InferenceServerClient(server.http_url)
    index = {m["name"]: m for m in client.get_model_repository_index()}
    client.close()
    assert index["no_such_control"]["state"] == "UNAVAILABLE"
    assert (
        "sequence batching input 'BEGIN' of model 'no_such_control' is not an input of its "
        "ONNX model, whose inputs are: INPUT, START, STATE_IN"
    ) in index["no_such_control"]["reason"]


def test_concurrent_sequences_batched_together_keep_their_own_state(server: ServerProcess) -> None:
    sums: dict[int, list[float]] = {}
    failures: list[BaseException] = []

    def run(sequence: int) -> None:
        client = grpcclient.InferenceServerClient(server.grpc_url)
        try:
            sums[sequence] = [
                _step(client, grpcclient, "acc_oldest", sequence, float(sequence), i == 0, i == 19)
                for i in range(20)
            ]
        except BaseException as exc:  # noqa: BLE001 - reported below
            failures.append(exc)
        finally:
            client.close()

    threads = [threading.Thread(target=run, args=(s,)) for s in range(1, 9)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert not failures
    assert sums == {s: [100.0 + s * (i + 1) for i in range(20)] for s in range(1, 9)}
    client = httpclient.InferenceServerClient(server.http_url)
    stats = client.get_inference_statistics("acc_oldest")["model_stats"][0]
    client.close()
    # 160 requests of 8 sequences in flight at once ran in fewer, joined runs.
    assert int(stats["inference_count"]) == 160
    assert int(stats["execution_count"]) < 160
