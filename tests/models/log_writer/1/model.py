"""Writes its input to the log with pb_utils.Logger at INFO and VERBOSE (and raises it as
an error when it starts with "raise:"); never prints, so every line it causes is the
server's."""

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            tensor = pb_utils.get_input_tensor_by_name(request, "TEXT")
            text = tensor.as_numpy()[0].decode()
            if text.startswith("raise:"):
                raise ValueError(text)
            pb_utils.Logger.log_info(f"log_writer says {text}")
            pb_utils.Logger.log_verbose(f"log_writer verbose {text}")
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUT", tensor.as_numpy())]))
        return responses
