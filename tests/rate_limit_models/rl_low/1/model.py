"""Rate limiter test model: waits MS milliseconds, or, when MS is negative, writes
GATE + ".started" and waits for the file GATE; answers SPAN = [start, end] (monotonic ns)
and MS_OUT = MS."""

import os
import time

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            ms = pb_utils.get_input_tensor_by_name(request, "MS").as_numpy()
            gate = pb_utils.get_input_tensor_by_name(request, "GATE").as_numpy()
            start = time.monotonic_ns()
            wait = int(ms.reshape(-1)[0])
            if wait < 0:
                path = gate.reshape(-1)[0]
                path = path.decode() if isinstance(path, bytes) else str(path)
                open(path + ".started", "w").close()
                deadline = time.monotonic() + 60
                while not os.path.exists(path) and time.monotonic() < deadline:
                    time.sleep(0.005)
            else:
                time.sleep(wait / 1000)
            span = np.array([start, time.monotonic_ns()], np.int64)
            if ms.ndim == 2:  # batched model: one row per request
                span = span.reshape(1, 2)
            responses.append(
                pb_utils.InferenceResponse(
                    [pb_utils.Tensor("SPAN", span), pb_utils.Tensor("MS_OUT", ms.astype(np.int32))]
                )
            )
        return responses
