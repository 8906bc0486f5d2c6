"""Sleeps MS milliseconds and reports its pid and the wall-clock interval it ran in.

With ``--log-verbose`` it logs ``sleeping <MS> ms`` as it starts, so that a test can wait
until a request is inside ``execute`` rather than guess how long getting there takes."""

import os
import time

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        self.name = args["model_instance_name"]

    def execute(self, requests):
        responses = []
        for request in requests:
            ms = int(pb_utils.get_input_tensor_by_name(request, "MS").as_numpy()[0])
            start = time.time()
            pb_utils.Logger.log_verbose(f"sleeping {ms} ms")
            time.sleep(ms / 1000.0)
            responses.append(
                pb_utils.InferenceResponse(
                    [
                        pb_utils.Tensor("PID", np.array([os.getpid()], np.int64)),
                        pb_utils.Tensor("START", np.array([start], np.float64)),
                        pb_utils.Tensor("END", np.array([time.time()], np.float64)),
                    ]
                )
            )
        return responses
