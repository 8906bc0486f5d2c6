"""A decoupled model whose request parameter ``mode`` picks how it answers COUNT
responses (INDEX = 0..COUNT-1, WORD = "w<i>"):

- ``final_alone`` (default): the responses, then the final flag without a response
- ``final_with_data``: the last response carries the final flag
- ``thread``: everything sent from a background thread after execute returned
- ``error_mid``: one response, an error response, one more response, then final
- ``raise``: execute raises before sending anything
- ``after_final``: final, then another send; the error that send raised is kept
  for ``report``
- ``slow``: one response every 50 ms until COUNT or cancellation; ``report`` answers
  what happened ("cancelled after <n>" / "completed")
- ``big``: COUNT responses of 1 MiB each (WORD), as fast as they go, until
  cancellation; noted like ``slow``
- ``block``: like ``slow`` but inside execute, so the instance stays busy
- ``die``: one response, then the worker process exits
- ``report``: one response whose WORD is the last recorded note, then final
"""

import json
import os
import threading
import time

import numpy as np
import triton_python_backend_utils as pb_utils

FINAL = pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL


def word(i):
    return pb_utils.InferenceResponse(
        [
            pb_utils.Tensor("INDEX", np.array([i], dtype=np.int32)),
            pb_utils.Tensor("WORD", np.array([f"w{i}".encode()], dtype=np.object_)),
        ]
    )


def note_response(text):
    return pb_utils.InferenceResponse(
        [
            pb_utils.Tensor("INDEX", np.array([-1], dtype=np.int32)),
            pb_utils.Tensor("WORD", np.array([text.encode()], dtype=np.object_)),
        ]
    )


class TritonPythonModel:
    def initialize(self, args):
        self.note = ""
        self.threads = []

    def execute(self, requests):
        for request in requests:
            count = int(pb_utils.get_input_tensor_by_name(request, "COUNT").as_numpy()[0])
            mode = json.loads(request.parameters()).get("mode", "final_alone")
            sender = request.get_response_sender()
            print(f"decoupled_words execute {request.request_id()}", flush=True)
            if mode == "raise":
                raise RuntimeError("asked to fail")
            if mode == "thread":
                thread = threading.Thread(target=self.send_later, args=(sender, count))
                thread.start()
                self.threads.append(thread)
            elif mode == "slow":
                thread = threading.Thread(target=self.send_slowly, args=(sender, count))
                thread.start()
                self.threads.append(thread)
            elif mode == "big":
                thread = threading.Thread(target=self.send_big, args=(sender, count))
                thread.start()
                self.threads.append(thread)
            elif mode == "block":
                self.send_slowly(sender, count)
            elif mode == "die":
                sender.send(word(0))
                time.sleep(0.2)
                os._exit(1)
            elif mode == "report":
                sender.send(note_response(self.note), flags=FINAL)
            elif mode == "after_final":
                sender.send(flags=FINAL)
                try:
                    sender.send(word(0))
                    self.note = "no error"
                except pb_utils.TritonModelException as exc:
                    self.note = str(exc)
            elif mode == "error_mid":
                sender.send(word(0))
                sender.send(pb_utils.InferenceResponse(error=pb_utils.TritonError("bad word")))
                sender.send(word(1))
                sender.send(flags=FINAL)
            elif mode == "final_with_data":
                for i in range(count):
                    sender.send(word(i), flags=FINAL if i == count - 1 else 0)
                if count == 0:
                    sender.send(flags=FINAL)
            else:
                for i in range(count):
                    sender.send(word(i))
                sender.send(flags=FINAL)
        return None

    def send_later(self, sender, count):
        time.sleep(0.05)
        for i in range(count):
            sender.send(word(i))
        sender.send(flags=FINAL)

    def send_slowly(self, sender, count):
        sent = 0
        for i in range(count):
            if sender.is_cancelled():
                break
            sender.send(word(i))
            sent += 1
            time.sleep(0.05)
        if sender.is_cancelled():
            self.note = f"cancelled after {sent}"
            print(f"decoupled_words: {self.note}", flush=True)
        else:
            self.note = "completed"
        sender.send(flags=FINAL)

    def send_big(self, sender, count):
        block = np.array([b"x" * (1 << 20)], dtype=np.object_)
        sent = 0
        for i in range(count):
            if sender.is_cancelled():
                break
            index = pb_utils.Tensor("INDEX", np.array([i], dtype=np.int32))
            sender.send(pb_utils.InferenceResponse([index, pb_utils.Tensor("WORD", block)]))
            sent += 1
        if sender.is_cancelled():
            self.note = f"cancelled after {sent}"
            print(f"decoupled_words: {self.note}", flush=True)
        else:
            self.note = "completed"
        sender.send(flags=FINAL)

    def finalize(self):
        for thread in self.threads:
            thread.join(5)
