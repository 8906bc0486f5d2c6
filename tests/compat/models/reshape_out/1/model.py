"""Outputs declared with reshape: the model returns the reshape shapes, clients see dims."""

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "IN").as_numpy()  # [batch]
            batch = x.shape[0]
            responses.append(
                pb_utils.InferenceResponse(
                    output_tensors=[
                        pb_utils.Tensor("OUT", x * 2),  # [batch] -> [batch, 1]
                        pb_utils.Tensor(  # [batch, 4] -> [batch, 2, 2]
                            "GRID", np.tile(np.arange(4, dtype=np.float32), (batch, 1)) + x[:, None]
                        ),
                        pb_utils.Tensor(  # [batch, 3] -> [batch, 3, 1]
                            "VAR", np.ones((batch, 3), dtype=np.float32) * x[:, None]
                        ),
                        pb_utils.Tensor("PLAIN", x.reshape(batch, 1)),
                    ]
                )
            )
        return responses
