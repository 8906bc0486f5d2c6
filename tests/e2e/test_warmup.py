"""Warm-up (``model_warmup``): samples run on every instance before the model is READY; a
failing sample leaves the model UNAVAILABLE with the reason."""

from __future__ import annotations

import numpy as np
import pytest
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from tritium.testing import ServerProcess
from tritium.testing.lifecycle import marked_config, marked_inputs

MODEL_PY = """
import os
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        self.log = os.path.join(args["model_repository"], "calls.log")
        self.instance = args["model_instance_name"]

    def execute(self, requests):
        values = [int(pb_utils.get_input_tensor_by_name(r, "X").as_numpy()[0]) for r in requests]
        with open(self.log, "a") as f:
            f.write(f"{self.instance} {len(requests)} {values}\\n")
        if -1 in values:
            raise ValueError("cannot take -1")
        return [
            pb_utils.InferenceResponse(
                [
                    pb_utils.Tensor("MARK", np.array([v], np.int32)),
                    pb_utils.Tensor("PID", np.array([os.getpid()], np.int64)),
                ]
            )
            for v in values
        ]
"""

WARMUP = """
model_warmup [
  {{
    name: "{sample}"
    batch_size: 2
    count: 3
    inputs {{ key: "X" value: {{ data_type: TYPE_INT32 dims: [ 1 ] {data} }} }}
  }}
]
"""


def _model(repo, name, data, instances=1):  # noqa: ANN001, ANN202
    folder = repo / name
    (folder / "1").mkdir(parents=True)
    (folder / "1" / "model.py").write_text(MODEL_PY)
    extra = WARMUP.format(sample=f"{name}_sample", data=data)
    (folder / "config.pbtxt").write_text(marked_config(name, instances, extra))
    (folder / "warmup").mkdir()
    (folder / "warmup" / "x.bin").write_bytes(np.array([42], "<i4").tobytes())
    (folder / "warmup" / "minus.bin").write_bytes(np.array([-1], "<i4").tobytes())
    return folder


@pytest.fixture(scope="module")
def server(tmp_path_factory):  # noqa: ANN001, ANN201
    repo = tmp_path_factory.mktemp("warm")
    _model(repo, "zeros", "zero_data: true", instances=2)
    _model(repo, "from_file", 'input_data_file: "x.bin"')
    _model(repo, "bad_sample", 'input_data_file: "minus.bin"')
    _model(repo, "escape", 'input_data_file: "../config.pbtxt"')
    (repo / "zeros" / "warmup" / "link.bin").symlink_to(repo / "from_file" / "warmup" / "x.bin")
    _model(repo, "via_link", 'input_data_file: "link.bin"')
    (repo / "via_link" / "warmup" / "link.bin").symlink_to(repo / "zeros" / "config.pbtxt")
    with ServerProcess([repo], ["--model-control-mode=explicit"]) as running:
        running.repo = repo  # type: ignore[attr-defined]
        yield running


def _calls(server, name):  # noqa: ANN001, ANN202
    path = server.repo / name / "calls.log"
    return path.read_text().splitlines() if path.exists() else []


def test_warmup_runs_on_every_instance_before_ready(server):
    client = httpclient.InferenceServerClient(server.http_url)
    assert _calls(server, "zeros") == []
    client.load_model("zeros")
    calls = _calls(server, "zeros")
    # 3 runs of a 2-request batch of zeros on each of the 2 instances, all before READY.
    assert sorted(calls) == sorted([f"zeros_0_{i} 2 [0, 0]" for i in (0, 1)] * 3), calls
    assert client.is_model_ready("zeros")
    client.infer("zeros", marked_inputs(httpclient, 5))
    assert len(_calls(server, "zeros")) == 7
    client.close()


def test_warmup_reads_input_data_files_from_the_warmup_folder(server):
    client = httpclient.InferenceServerClient(server.http_url)
    client.load_model("from_file")
    assert _calls(server, "from_file") == ["from_file_0_0 2 [42, 42]"] * 3
    client.close()


def test_a_failing_warmup_leaves_the_model_unavailable_with_the_reason(server):
    client = httpclient.InferenceServerClient(server.http_url)
    with pytest.raises(InferenceServerException) as info:
        client.load_model("bad_sample")
    assert "failed to run warmup sample 'bad_sample_sample'" in str(info.value)
    assert "cannot take -1" in str(info.value)
    assert not client.is_model_ready("bad_sample")
    (entry,) = [m for m in client.get_model_repository_index() if m["name"] == "bad_sample"]
    assert entry["state"] == "UNAVAILABLE" and "cannot take -1" in entry["reason"]
    client.close()


@pytest.mark.parametrize("name", ["escape", "via_link"])
def test_warmup_files_outside_the_warmup_folder_are_refused(server, name):
    client = httpclient.InferenceServerClient(server.http_url)
    with pytest.raises(InferenceServerException) as info:
        client.load_model(name)
    assert "must stay within the model's 'warmup' folder" in str(info.value)
    assert _calls(server, name) == []
    client.close()
