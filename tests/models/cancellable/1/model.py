"""Works for up to 10 s, stopping early (and saying so) once the request is cancelled."""

import time

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        request = requests[0]
        tag = pb_utils.get_input_tensor_by_name(request, "TAG").as_numpy()[0].decode()
        # Tests wait for this line instead of guessing when the request reached the model.
        print(f"cancellable {tag} started", flush=True)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and not request.is_cancelled():
            time.sleep(0.01)
        cancelled = request.is_cancelled()
        print(f"cancellable {tag} cancelled={cancelled}", flush=True)
        return [pb_utils.InferenceResponse([pb_utils.Tensor("CANCELLED", np.array([cancelled]))])]
