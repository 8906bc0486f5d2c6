"""Decoupled stream for the chaos tool: COUNT responses carrying TAG, then the final flag;
stops early when the client cancels."""

import threading
import time

import numpy as np
import triton_python_backend_utils as pb_utils

FINAL = pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL


class TritonPythonModel:
    def initialize(self, args):
        self.threads = []

    def execute(self, requests):
        for request in requests:
            tag = pb_utils.get_input_tensor_by_name(request, "TAG").as_numpy().copy()
            count = int(pb_utils.get_input_tensor_by_name(request, "COUNT").as_numpy()[0])
            delay = int(pb_utils.get_input_tensor_by_name(request, "DELAY_MS").as_numpy()[0])
            sender = request.get_response_sender()
            thread = threading.Thread(target=self.send, args=(sender, tag, count, delay))
            thread.start()
            self.threads = [t for t in self.threads if t.is_alive()] + [thread]
        return None

    def send(self, sender, tag, count, delay):
        for i in range(count):
            if sender.is_cancelled():
                break
            index = pb_utils.Tensor("INDEX", np.array([i], dtype=np.int32))
            sender.send(pb_utils.InferenceResponse([pb_utils.Tensor("TAG", tag), index]))
            if delay:
                time.sleep(delay / 1000)
        sender.send(flags=FINAL)

    def finalize(self):
        for thread in self.threads:
            thread.join(5)
