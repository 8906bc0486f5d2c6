"""Misbehaves on request: MODE selects how execute fails."""

import os

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        mode = pb_utils.get_input_tensor_by_name(requests[0], "MODE").as_numpy()[0].decode()
        if mode == "raise":
            raise ValueError("model exploded")
        if mode == "too_few":
            return []
        if mode == "not_a_response":
            return ["oops" for _ in requests]
        if mode == "error":
            return [
                pb_utils.InferenceResponse(
                    error=pb_utils.TritonError("bad input value", pb_utils.TritonError.INVALID_ARG)
                )
                for _ in requests
            ]
        if mode == "crash":
            os._exit(3)
        return [
            pb_utils.InferenceResponse([pb_utils.Tensor("OUT", np.array([os.getpid()], np.int32))])
            for _ in requests
        ]
