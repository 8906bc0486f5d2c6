"""Scores to classify: SCORES has labels (the third one empty), COUNTS has none, and FLAGS
has a type classification refuses."""

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "IN").as_numpy()
            responses.append(
                pb_utils.InferenceResponse(
                    output_tensors=[
                        pb_utils.Tensor("SCORES", x),
                        pb_utils.Tensor("COUNTS", (x * 10).astype(np.int32)),
                        pb_utils.Tensor("FLAGS", x > 0.5),
                    ]
                )
            )
        return responses
