"""Holds a request until the test opens its gate, then answers OUT = DATA * 2.

GATE is a path prefix: the model creates ``<GATE>.started`` once it holds the request and
waits (at most 30 s) for ``<GATE>.release`` to exist, so a test can act on a request it
knows is executing without guessing how long to sleep.
"""

import os
import time

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            gate = pb_utils.get_input_tensor_by_name(request, "GATE").as_numpy()[0].decode()
            data = pb_utils.get_input_tensor_by_name(request, "DATA").as_numpy()
            # Read the input before holding: the test may change the region meanwhile.
            out = (data * 2).astype(np.float32)
            with open(gate + ".started", "w"):
                pass
            deadline = time.monotonic() + 30
            while not os.path.exists(gate + ".release") and time.monotonic() < deadline:
                time.sleep(0.005)
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUT", out)]))
        return responses
