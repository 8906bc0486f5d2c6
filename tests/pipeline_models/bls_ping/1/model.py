"""Calls bls_pong (X > 0: once more with X - 1); a BLS error is passed on as ours."""

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "X").as_numpy()
            if x[0] <= 0:
                responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("Y", x)]))
                continue
            answer = pb_utils.InferenceRequest(
                model_name="bls_pong",
                inputs=[pb_utils.Tensor("X", (x - 1).astype(np.float32))],
                requested_output_names=["Y"],
            ).exec()
            if answer.has_error():
                responses.append(pb_utils.InferenceResponse(error=answer.error()))
            else:
                responses.append(pb_utils.InferenceResponse(
                    [pb_utils.get_output_tensor_by_name(answer, "Y")]))
        return responses
