"""A model whose initialize always fails, so it never becomes ready."""

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        raise pb_utils.TritonModelException("weights are missing")

    def execute(self, requests):
        return [pb_utils.InferenceResponse() for _ in requests]
