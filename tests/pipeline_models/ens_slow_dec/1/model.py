"""One configurable ensemble step: Y = X * scale + offset after sleeping sleep_ms.

scale, offset and sleep_ms come from the config's parameters; a negative input fails the
request, so ensembles can show a failing step. BATCH reports how many requests ran together.
"""

import json
import time

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        params = json.loads(args["model_config"]).get("parameters", {})

        def value(key, default):
            return float(params.get(key, {}).get("string_value", default))

        self.scale = value("scale", 1)
        self.offset = value("offset", 0)
        self.sleep = value("sleep_ms", 0) / 1000.0

    def execute(self, requests):
        if self.sleep:
            time.sleep(self.sleep)
        responses = []
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "X").as_numpy()
            if (x < 0).any():
                responses.append(pb_utils.InferenceResponse(
                    error=pb_utils.TritonError("negative input is not allowed")))
                continue
            y = (x * self.scale + self.offset).astype(np.float32)
            batch = np.full((x.shape[0], 1), len(requests), np.int32)
            responses.append(pb_utils.InferenceResponse([
                pb_utils.Tensor("Y", y), pb_utils.Tensor("BATCH", batch)]))
        return responses
