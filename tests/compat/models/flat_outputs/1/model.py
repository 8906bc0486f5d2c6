"""A model without batching: OUT (labelled) is the input, ROWS its six values flat, which the
config reshapes to [3, 2]."""

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "IN").as_numpy()
            responses.append(
                pb_utils.InferenceResponse(
                    output_tensors=[pb_utils.Tensor("OUT", x), pb_utils.Tensor("ROWS", x.reshape(6))]
                )
            )
        return responses
