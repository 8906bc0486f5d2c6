"""Decoupled with dynamic batching and two instances: every request gets two responses
(VALUE, then VALUE + 1000), each saying how many requests its batch held, then the final
flag; the second one is sent from a thread after execute returned."""

import threading

import numpy as np
import triton_python_backend_utils as pb_utils


def answer(value, batch):
    return pb_utils.InferenceResponse(
        [
            pb_utils.Tensor("VALUE", np.array([[value]], dtype=np.int32)),
            pb_utils.Tensor("BATCH", np.array([[batch]], dtype=np.int32)),
        ]
    )


class TritonPythonModel:
    def execute(self, requests):
        later = []
        for request in requests:
            value = int(pb_utils.get_input_tensor_by_name(request, "VALUE").as_numpy()[0, 0])
            sender = request.get_response_sender()
            sender.send(answer(value, len(requests)))
            later.append((sender, value))
        threading.Thread(target=self.finish, args=(later, len(requests))).start()

    def finish(self, later, batch):
        for sender, value in later:
            sender.send(answer(value + 1000, batch))
            sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
