"""logits -> (label, probability) with a softmax."""

import numpy as np
import triton_python_backend_utils as pb_utils

LABELS = np.array([b"negative", b"neutral", b"positive"], dtype=object)


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            logits = pb_utils.get_input_tensor_by_name(request, "LOGITS").as_numpy()
            exp = np.exp(logits - logits.max(axis=1, keepdims=True))
            probabilities = exp / exp.sum(axis=1, keepdims=True)
            best = probabilities.argmax(axis=1)
            label = LABELS[best].reshape(-1, 1)
            score = probabilities[np.arange(len(best)), best].reshape(-1, 1).astype(np.float32)
            responses.append(
                pb_utils.InferenceResponse(
                    [pb_utils.Tensor("LABEL", label), pb_utils.Tensor("SCORE", score)]
                )
            )
        return responses
