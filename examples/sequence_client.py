"""Run several sequences at once against the ``running_mean`` example model.

Every sequence's requests go out interleaved on one gRPC stream; the server keeps each
sequence's state and answers each request with its own sequence's running mean.

    tritium serve --model-repository=examples/model_repository
    python examples/sequence_client.py --url localhost:8001
"""

from __future__ import annotations

import argparse
import queue

import numpy as np
import tritonclient.grpc as grpcclient

SEQUENCES = {
    101: [1.0, 2.0, 3.0, 4.0],
    102: [10.0, 0.0, 10.0, 0.0],
    103: [5.0, 5.0, 5.0, 5.0],
    "sensor-a": [2.0, 4.0, 8.0, 16.0],
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default="localhost:8001", help="gRPC address of the server")
    args = parser.parse_args()

    answers: queue.Queue = queue.Queue()
    client = grpcclient.InferenceServerClient(args.url)
    client.start_stream(callback=lambda result, error: answers.put((result, error)))
    try:
        steps = max(len(values) for values in SEQUENCES.values())
        for step in range(steps):
            for sequence_id, values in SEQUENCES.items():
                value = grpcclient.InferInput("VALUE", [1, 1], "FP32")
                value.set_data_from_numpy(np.array([[values[step]]], np.float32))
                client.async_stream_infer(
                    "running_mean",
                    [value],
                    request_id=f"{sequence_id}/{step}",
                    sequence_id=sequence_id,
                    sequence_start=step == 0,
                    sequence_end=step == len(values) - 1,
                )
        means: dict[str, list[float]] = {str(s): [] for s in SEQUENCES}
        for _ in range(sum(len(v) for v in SEQUENCES.values())):
            result, error = answers.get(timeout=30)
            if error is not None:
                raise SystemExit(f"request failed: {error}")
            sequence_id = result.get_response().id.split("/")[0]
            means[sequence_id].append(round(float(result.as_numpy("MEAN")[0, 0]), 3))
    finally:
        client.stop_stream()
        client.close()
    for sequence_id, values in means.items():
        print(f"sequence {sequence_id}: running mean {values}")


if __name__ == "__main__":
    main()
