"""Answer every request with an error response carrying a Triton error code.

The code is read from the request parameter "code" (e.g. "NOT_FOUND"), falling back to the
model parameter "error_code".
"""

import json

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        config = json.loads(args["model_config"])
        self.default_code = config["parameters"]["error_code"]["string_value"]

    def execute(self, requests):
        responses = []
        for request in requests:
            params = json.loads(request.parameters() or "{}")
            name = params.get("code", self.default_code)
            code = getattr(pb_utils.TritonError, name)
            error = pb_utils.TritonError("the input is not acceptable: " + name, code)
            responses.append(pb_utils.InferenceResponse(error=error))
        return responses
