"""Multiply a batch of FP32 vectors by two."""

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            data = pb_utils.get_input_tensor_by_name(request, "INPUT").as_numpy()
            output = pb_utils.Tensor("OUTPUT", data * 2)
            responses.append(pb_utils.InferenceResponse(output_tensors=[output]))
        return responses
