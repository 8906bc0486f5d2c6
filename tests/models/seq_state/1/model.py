"""Implicit state: reads ACC_IN and COUNT_IN like inputs, returns the next ones as outputs."""

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            value = pb_utils.get_input_tensor_by_name(request, "INPUT").as_numpy()
            acc = pb_utils.get_input_tensor_by_name(request, "ACC_IN").as_numpy()
            count = pb_utils.get_input_tensor_by_name(request, "COUNT_IN").as_numpy()
            assert acc.shape == (1, 1) and acc.dtype == np.int32, acc
            assert count.shape == (1, 1) and count.dtype == np.int64, count
            total = (acc + value).astype(np.int32)
            counted = (count + 1).astype(np.int64)
            responses.append(
                pb_utils.InferenceResponse(
                    [
                        pb_utils.Tensor("OUTPUT", total),
                        pb_utils.Tensor("COUNTED", counted),
                        pb_utils.Tensor("ACC_OUT", total),
                        pb_utils.Tensor("COUNT_OUT", counted),
                    ]
                )
            )
        return responses
