"""Echo a vector of strings and return the byte length of each element."""

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            text = pb_utils.get_input_tensor_by_name(request, "TEXT").as_numpy()
            lengths = np.array([len(item) for item in text.reshape(-1)], dtype=np.int32)
            echo = pb_utils.Tensor("ECHO", text.astype(np.object_))
            length = pb_utils.Tensor("LENGTH", lengths.reshape(text.shape))
            responses.append(pb_utils.InferenceResponse(output_tensors=[echo, length]))
        return responses
