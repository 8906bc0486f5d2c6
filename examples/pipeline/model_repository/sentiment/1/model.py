"""features [positive, negative, words] -> logits for (negative, neutral, positive).

Stands in for a trained network: one matrix product over the whole batch.
"""

import numpy as np
import triton_python_backend_utils as pb_utils

WEIGHTS = np.array(
    [
        [-1.0, 2.0, 0.0],  # negative
        [0.0, 0.0, 0.1],  # neutral: wins when neither kind of word shows up
        [2.0, -1.0, 0.0],  # positive
    ],
    dtype=np.float32,
)
BIAS = np.array([0.0, 0.5, 0.0], dtype=np.float32)


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "FEATURES").as_numpy()
            logits = x @ WEIGHTS.T + BIAS
            responses.append(
                pb_utils.InferenceResponse([pb_utils.Tensor("LOGITS", logits.astype(np.float32))])
            )
        return responses
