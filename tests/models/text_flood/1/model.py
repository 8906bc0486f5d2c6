"""Streams 64 KiB pieces of text, up to 5000 (about 320 MiB), as fast as the sender takes
them, from a thread; stops when the request is cancelled and prints
``text_flood: cancelled after <n>``."""

import threading
import time

import numpy as np
import triton_python_backend_utils as pb_utils

PIECE = np.array([b"x" * 65536], dtype=np.object_)
LIMIT = 5000


class TritonPythonModel:
    def execute(self, requests):
        for request in requests:
            threading.Thread(target=self._flood, args=(request.get_response_sender(),)).start()
        return None

    def _flood(self, sender):
        sent = 0
        while sent < LIMIT:
            if sender.is_cancelled():
                print(f"text_flood: cancelled after {sent}", flush=True)
                return
            sender.send(pb_utils.InferenceResponse([pb_utils.Tensor("text_output", PIECE)]))
            sent += 1
            if sent % 64 == 0:
                time.sleep(0.001)  # let the cancellation reach us
        print("text_flood: completed", flush=True)
        sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
