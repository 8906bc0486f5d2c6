"""Send a few texts to the pipeline over HTTP and gRPC.

    tritium serve --model-repository=examples/onnx_pipeline/model_repository
    python examples/onnx_pipeline/client.py [--url localhost:8000] [--grpc-url localhost:8001]
"""

from __future__ import annotations

import argparse

import numpy as np
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient

TEXTS = [
    "I love this, it is great and fast",
    "awful, slow and broken",
    "the parcel arrived on tuesday",
]


def classify(module, client, model: str, texts: list[str]) -> list[tuple[str, float]]:  # noqa: ANN001
    data = np.array([[t.encode()] for t in texts], dtype=object)
    text = module.InferInput("TEXT", list(data.shape), "BYTES")
    text.set_data_from_numpy(data)
    result = client.infer(model, [text])
    labels = result.as_numpy("LABEL")[:, 0]
    scores = result.as_numpy("SCORE")[:, 0]
    return [(label.decode(), float(score)) for label, score in zip(labels, scores)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default="localhost:8000")
    parser.add_argument("--grpc-url", default="localhost:8001")
    args = parser.parse_args()
    clients = [
        ("HTTP", httpclient, httpclient.InferenceServerClient(args.url)),
        ("gRPC", grpcclient, grpcclient.InferenceServerClient(args.grpc_url)),
    ]
    for protocol, module, client in clients:
        for text, (label, score) in zip(TEXTS, classify(module, client, "text_sentiment", TEXTS)):
            print(f"{protocol:4} {label:8} {score:.2f}  {text!r}")
        client.close()


if __name__ == "__main__":
    main()
