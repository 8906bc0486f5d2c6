"""Answer checks a scenario runs on each server before and after its load.

A throughput number counts only if the server still answers correctly under that load:
``seq_sum`` keeps a running sum per sequence, so a sequence sent with ``tritonclient``
before and after perf_analyzer's run must come back as exactly its own running sums.
"""

from __future__ import annotations

import queue
import random

import numpy as np
import tritonclient.grpc as grpcclient

SEQUENCE = (5, 7, 11, 13)
TIMEOUT_S = 30.0


def seq_sum_sequence(grpc_url: str) -> str | None:
    """Send one sequence to ``seq_sum`` on a gRPC stream; None when every answer is the
    running sum, else what went wrong."""
    results: queue.Queue = queue.Queue()
    client = grpcclient.InferenceServerClient(grpc_url)
    # An id far from perf_analyzer's (it counts up from 1), so the two never share one.
    sequence_id = random.randrange(2**40, 2**41)
    try:
        client.start_stream(callback=lambda result, error: results.put((result, error)))
        for i, value in enumerate(SEQUENCE):
            tensor = grpcclient.InferInput("INPUT", [1, 1], "INT32")
            tensor.set_data_from_numpy(np.array([[value]], dtype=np.int32))
            client.async_stream_infer(
                "seq_sum",
                [tensor],
                sequence_id=sequence_id,
                sequence_start=i == 0,
                sequence_end=i == len(SEQUENCE) - 1,
            )
        got = []
        for _ in SEQUENCE:
            result, error = results.get(timeout=TIMEOUT_S)
            if error is not None:
                return f"seq_sum answered an error: {error}"
            got.append(int(result.as_numpy("OUTPUT").flat[0]))
    except queue.Empty:
        return "seq_sum did not answer within 30 s"
    finally:
        client.stop_stream()
        client.close()
    want = [int(total) for total in np.cumsum(SEQUENCE)]
    if got != want:
        return f"seq_sum answered running sums {got}, expected {want}"
    return None


CHECKS = {"seq_sum_sequence": seq_sum_sequence}
