"""Reports the shape the model sees for IN (after the config's reshape)."""

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        out = []
        for r in requests:
            shape = pb_utils.get_input_tensor_by_name(r, "IN").as_numpy().shape
            out.append(pb_utils.InferenceResponse([pb_utils.Tensor("SHAPE", np.array([shape], np.int64))]))
        return out
