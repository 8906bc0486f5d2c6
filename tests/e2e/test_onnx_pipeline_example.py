"""The ONNX pipeline example (examples/onnx_pipeline): Python pre-processing → ONNX model →
Python post-processing as an ensemble answers as its README shows, over HTTP and gRPC."""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

import tritonclient.grpc as grpcclient  # noqa: E402
import tritonclient.http as httpclient  # noqa: E402

from tritium.testing import ServerProcess  # noqa: E402

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "onnx_pipeline"


def _client_module():  # noqa: ANN202
    spec = importlib.util.spec_from_file_location("onnx_pipeline_client", EXAMPLE / "client.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_onnx_pipeline_example_over_http_and_grpc(tmp_path: Path) -> None:
    repository = tmp_path / "model_repository"
    shutil.copytree(EXAMPLE / "model_repository", repository)
    subprocess.run([sys.executable, str(EXAMPLE / "make_model.py"), str(repository)], check=True)
    example = _client_module()
    with ServerProcess([repository], grpc=True) as server:
        clients = [
            (httpclient, httpclient.InferenceServerClient(server.http_url)),
            (grpcclient, grpcclient.InferenceServerClient(server.grpc_url)),
        ]
        for module, client in clients:
            try:
                results = example.classify(module, client, "text_sentiment", example.TEXTS)
                assert [label for label, _ in results] == ["positive", "negative", "neutral"]
                assert all(0.5 < score <= 1.0 for _, score in results), results
            finally:
                client.close()
        http = httpclient.InferenceServerClient(server.http_url)
        try:
            config = http.get_model_config("sentiment")
        finally:
            http.close()
    # The ONNX step's tensors came from its graph.
    assert [(i["name"], i["dims"]) for i in config["input"]] == [("FEATURES", [3])]
    assert [(o["name"], o["dims"]) for o in config["output"]] == [("LOGITS", [3])]
