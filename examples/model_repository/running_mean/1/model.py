"""Running mean of VALUE over a sequence, with the state kept by the server.

TOTALS_IN holds [sum, count] so far (zeros on the sequence's first request); the model
returns the updated pair as TOTALS_OUT, which the server hands back with the sequence's
next request. The model itself remembers nothing between requests.
"""

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            value = pb_utils.get_input_tensor_by_name(request, "VALUE").as_numpy()  # [1, 1]
            totals = pb_utils.get_input_tensor_by_name(request, "TOTALS_IN").as_numpy()  # [1, 2]
            total = totals[0, 0] + float(value[0, 0])
            count = totals[0, 1] + 1.0
            responses.append(
                pb_utils.InferenceResponse(
                    output_tensors=[
                        pb_utils.Tensor("MEAN", np.array([[total / count]], np.float32)),
                        pb_utils.Tensor("COUNT", np.array([[int(count)]], np.int64)),
                        pb_utils.Tensor("TOTALS_OUT", np.array([[total, count]], np.float64)),
                    ]
                )
            )
        return responses
