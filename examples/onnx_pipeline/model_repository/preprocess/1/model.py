"""Text -> features: how many positive words, how many negative words, how many words.

A real pipeline would run a tokenizer here; the point is the shape of the work: Python
code turning raw input (BYTES) into the tensor a model takes (FP32 [3]).
"""

import re

import numpy as np
import triton_python_backend_utils as pb_utils

POSITIVE = {"good", "great", "love", "excellent", "happy", "fast", "nice", "wonderful"}
NEGATIVE = {"bad", "awful", "hate", "terrible", "sad", "slow", "broken", "poor"}
WORD = re.compile(r"[a-z']+")


def features(text: bytes) -> list[float]:
    words = WORD.findall(text.decode("utf-8", "replace").lower())
    positive = sum(w in POSITIVE for w in words)
    negative = sum(w in NEGATIVE for w in words)
    return [float(positive), float(negative), float(len(words))]


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            texts = pb_utils.get_input_tensor_by_name(request, "TEXT").as_numpy()
            rows = np.array([features(t[0]) for t in texts], dtype=np.float32)
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("FEATURES", rows)]))
        return responses
