"""Sequence model for the chaos tool: echoes TAG; STEP = requests seen in the sequence."""

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        self.steps = {}

    def execute(self, requests):
        responses = []
        for request in requests:
            tag = pb_utils.get_input_tensor_by_name(request, "TAG").as_numpy()
            start = int(pb_utils.get_input_tensor_by_name(request, "START").as_numpy()[0, 0])
            end = int(pb_utils.get_input_tensor_by_name(request, "END").as_numpy()[0, 0])
            corrid = int(pb_utils.get_input_tensor_by_name(request, "CORRID").as_numpy()[0, 0])
            step = 1 if start else self.steps.get(corrid, 0) + 1
            if end:
                self.steps.pop(corrid, None)
            else:
                self.steps[corrid] = step
            responses.append(
                pb_utils.InferenceResponse(
                    [
                        pb_utils.Tensor("TAG", tag),
                        pb_utils.Tensor("STEP", np.array([[step]], np.int32)),
                    ]
                )
            )
        return responses
