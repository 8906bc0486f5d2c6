"""Sums the pixels of each UINT8 [224, 224, 3] image in the batch (a mid-size input)."""

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            images = pb_utils.get_input_tensor_by_name(request, "IMAGE").as_numpy()
            sums = images.reshape(images.shape[0], -1).sum(axis=1, dtype=np.int64)
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("SUM", sums.reshape(-1, 1))]))
        return responses
