"""Running sum per sequence for a model without batching (tensors have no batch dim)."""

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        self.sums = {}

    def execute(self, requests):
        responses = []
        for request in requests:
            value = int(pb_utils.get_input_tensor_by_name(request, "INPUT").as_numpy()[0])
            start = pb_utils.get_input_tensor_by_name(request, "START").as_numpy()
            corrid = pb_utils.get_input_tensor_by_name(request, "CORRID").as_numpy()
            assert start.shape == (1,) and corrid.shape == (1,) and corrid.dtype == np.int64
            key = int(corrid[0])
            total = (0 if start[0] else self.sums.get(key, 0)) + value
            self.sums[key] = total
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT", np.array([total], np.int32))]))
        return responses
