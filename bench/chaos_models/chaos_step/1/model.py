"""Echo TAG after sleeping the batch's longest DELAY_MS (chaos tool: batched path)."""

import time

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        delay = 0
        for request in requests:
            d = pb_utils.get_input_tensor_by_name(request, "DELAY_MS")
            delay = max(delay, int(d.as_numpy().max()) if d is not None else 0)
        if delay:
            time.sleep(delay / 1000)
        return [
            pb_utils.InferenceResponse(
                [pb_utils.Tensor("TAG", pb_utils.get_input_tensor_by_name(r, "TAG").as_numpy())]
            )
            for r in requests
        ]
