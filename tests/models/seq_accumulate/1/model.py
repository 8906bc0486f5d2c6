"""Running sum of INPUT per sequence (by CORRID), reset by START; END forgets the sum."""

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        self.sums = {}

    def execute(self, requests):
        responses = []
        for request in requests:
            value = int(pb_utils.get_input_tensor_by_name(request, "INPUT").as_numpy()[0, 0])
            start = pb_utils.get_input_tensor_by_name(request, "START").as_numpy()
            end = pb_utils.get_input_tensor_by_name(request, "END").as_numpy()
            ready = pb_utils.get_input_tensor_by_name(request, "READY").as_numpy()
            corrid = int(pb_utils.get_input_tensor_by_name(request, "CORRID").as_numpy()[0, 0])
            assert start.shape == (1, 1) and start.dtype == np.int32, start
            assert end.shape == (1, 1) and end.dtype == np.bool_, end
            assert ready.shape == (1, 1) and ready.dtype == np.float32 and ready[0, 0] == 1.0
            assert bool(start[0, 0]) == bool(request.flags() & 1)
            assert bool(end[0, 0]) == bool(request.flags() & 2)
            assert corrid == request.correlation_id()
            total = (0 if start[0, 0] else self.sums.get(corrid, 0)) + value
            if end[0, 0]:
                self.sums.pop(corrid, None)
            else:
                self.sums[corrid] = total
            responses.append(
                pb_utils.InferenceResponse(
                    [
                        pb_utils.Tensor("OUTPUT", np.array([[total]], np.int32)),
                        pb_utils.Tensor("BATCH", np.array([[len(requests)]], np.int32)),
                    ]
                )
            )
        return responses
