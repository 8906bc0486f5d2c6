"""Echoes every present input IN_<T> as OUT_<T> (all data types, optional inputs)."""

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            outputs = []
            for tensor in request.inputs():
                name = "OUT_" + tensor.name()[3:]
                if tensor.triton_dtype() == 14:  # BF16: numpy has no such type
                    outputs.append(pb_utils.Tensor.from_dlpack(name, tensor))
                else:
                    outputs.append(pb_utils.Tensor(name, tensor.as_numpy()))
            responses.append(pb_utils.InferenceResponse(output_tensors=outputs))
        return responses
