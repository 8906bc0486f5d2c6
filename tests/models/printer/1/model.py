"""Prints its input to stdout and logs it with pb_utils.Logger, then echoes it."""

import sys

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        print("printer initialized as", args["model_instance_name"])

    def execute(self, requests):
        responses = []
        for request in requests:
            text = pb_utils.get_input_tensor_by_name(request, "IN").as_numpy()
            print("printer got", text[0].decode())
            print("printer stderr", text[0].decode(), file=sys.stderr)
            pb_utils.Logger.log_info(f"printer logged {text[0].decode()}")
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUT", text)]))
        return responses

    def finalize(self):
        print("printer finalized")
