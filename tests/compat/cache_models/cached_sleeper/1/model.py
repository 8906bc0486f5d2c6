"""Sleeps MS milliseconds, returns DATA as OUT and its execution count as RUN; MS < 0
answers an error."""

import time

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        self.runs = 0

    def execute(self, requests):
        responses = []
        for request in requests:
            self.runs += 1
            ms = int(pb_utils.get_input_tensor_by_name(request, "MS").as_numpy()[0])
            data = pb_utils.get_input_tensor_by_name(request, "DATA").as_numpy()
            if ms < 0:
                responses.append(
                    pb_utils.InferenceResponse(error=pb_utils.TritonError("negative MS"))
                )
                continue
            time.sleep(ms / 1000.0)
            responses.append(
                pb_utils.InferenceResponse(
                    [
                        pb_utils.Tensor("OUT", data.astype(np.float32)),
                        pb_utils.Tensor("RUN", np.array([self.runs], np.int64)),
                    ]
                )
            )
        return responses
