"""Answers, as ``text_output``, a JSON object of what it was given: the prompt, each
sampling input present (by name, as a list), and the request parameters."""

import json

import numpy as np
import triton_python_backend_utils as pb_utils

NAMES = ("max_tokens", "temperature", "random_seed", "stop_words")


def _plain(value):
    if isinstance(value, bytes):
        return value.decode()
    return value.item() if hasattr(value, "item") else value


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            prompt = pb_utils.get_input_tensor_by_name(request, "text_input").as_numpy()
            seen = {"prompt": prompt.reshape(-1)[0].decode()}
            for name in NAMES:
                tensor = pb_utils.get_input_tensor_by_name(request, name)
                if tensor is not None:
                    data = tensor.as_numpy()
                    seen[name] = {
                        "shape": list(data.shape),
                        "values": [_plain(v) for v in data.reshape(-1)],
                    }
            seen["parameters"] = json.loads(request.parameters())
            text = json.dumps(seen, sort_keys=True).encode()
            output = pb_utils.Tensor("text_output", np.array([[text]], dtype=np.object_))
            responses.append(pb_utils.InferenceResponse([output]))
        return responses
