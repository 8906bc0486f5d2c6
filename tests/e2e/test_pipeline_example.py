"""The pipeline example (examples/pipeline) answers as its README shows, ensemble and BLS."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient

from tritium.testing import ServerProcess

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "pipeline"


def _client_module():  # noqa: ANN202
    spec = importlib.util.spec_from_file_location("pipeline_client", EXAMPLE / "client.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_pipeline_example_over_http_and_grpc():
    example = _client_module()
    expected = ["positive", "negative", "neutral"]
    with ServerProcess([EXAMPLE / "model_repository"], grpc=True) as server:
        clients = [
            (httpclient, httpclient.InferenceServerClient(server.http_url)),
            (grpcclient, grpcclient.InferenceServerClient(server.grpc_url)),
        ]
        for module, client in clients:
            try:
                for model in ("text_sentiment", "text_sentiment_bls"):
                    results = example.classify(module, client, model, example.TEXTS)
                    assert [label for label, _ in results] == expected, model
                    assert all(0.5 < score <= 1.0 for _, score in results), results
            finally:
                client.close()
