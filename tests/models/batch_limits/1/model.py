"""Echoes X as Y and reports, per request, how many requests shared its execute call.

The request parameter ``sleep_ms`` (first request of the batch) makes execute slow.
"""

import json
import time

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        sleep_ms = json.loads(requests[0].parameters()).get("sleep_ms", 0)
        time.sleep(sleep_ms / 1000)
        n = len(requests)
        return [
            pb_utils.InferenceResponse(
                [
                    pb_utils.Tensor("Y", pb_utils.get_input_tensor_by_name(r, "X").as_numpy()),
                    pb_utils.Tensor("BATCH", np.full((1, 1), n, np.int32)),
                ]
            )
            for r in requests
        ]
