"""Decoupled: one response per word of ``text_input`` (the word ``fail`` is answered
with an error response instead), then the final flag on its own; ``raise`` makes
execute raise."""

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        for request in requests:
            sender = request.get_response_sender()
            text = pb_utils.get_input_tensor_by_name(request, "text_input").as_numpy()[0]
            if text == b"raise":
                raise RuntimeError("asked to raise")
            for word in text.decode().split():
                if word == "fail":
                    error = pb_utils.TritonError("the model was asked to fail")
                    sender.send(pb_utils.InferenceResponse(error=error))
                    continue
                out = pb_utils.Tensor("text_output", np.array([word.encode()], dtype=np.object_))
                sender.send(pb_utils.InferenceResponse([out]))
            sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
        return None
