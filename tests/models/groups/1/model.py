"""Sleeps MS ms, then reports which instance (name, kind, device, pid) served the request."""

import os
import time

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        self.info = (args["model_instance_name"], args["model_instance_kind"], args["model_instance_device_id"])

    def execute(self, requests):
        out = []
        for request in requests:
            time.sleep(int(pb_utils.get_input_tensor_by_name(request, "MS").as_numpy()[0]) / 1000)
            name, kind, device = self.info
            out.append(
                pb_utils.InferenceResponse(
                    [
                        pb_utils.Tensor("NAME", np.array([name.encode()], np.object_)),
                        pb_utils.Tensor("KIND", np.array([kind.encode()], np.object_)),
                        pb_utils.Tensor("DEVICE", np.array([device.encode()], np.object_)),
                        pb_utils.Tensor("PID", np.array([os.getpid()], np.int64)),
                    ]
                )
            )
        return out
