"""Decoupled: one response per word of ``text_input`` (the word ``fail`` is answered
with an error response instead), then the final flag on its own; ``raise`` makes
execute raise; ``after_final`` ends the request, then tries to send again and keeps
the error it gets, which ``report`` answers as its one word."""

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    note = ""

    def execute(self, requests):
        for request in requests:
            sender = request.get_response_sender()
            text = pb_utils.get_input_tensor_by_name(request, "text_input").as_numpy()[0]
            if text == b"raise":
                raise RuntimeError("asked to raise")
            if text == b"after_final":
                sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
                try:
                    sender.send(pb_utils.InferenceResponse([]))
                    self.note = "no error"
                except Exception as exc:  # noqa: BLE001
                    self.note = f"{type(exc).__name__}: {exc}"
                continue
            if text == b"report":
                out = pb_utils.Tensor("text_output", np.array([self.note.encode()], np.object_))
                sender.send(pb_utils.InferenceResponse([out]))
                sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
                continue
            for word in text.decode().split():
                if word == "fail":
                    error = pb_utils.TritonError("the model was asked to fail")
                    sender.send(pb_utils.InferenceResponse(error=error))
                    continue
                out = pb_utils.Tensor("text_output", np.array([word.encode()], dtype=np.object_))
                sender.send(pb_utils.InferenceResponse([out]))
            sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
        return None
