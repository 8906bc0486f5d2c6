"""Answers with a JSON description of every input it received (name -> dtype, shape, values)."""

import json

import numpy as np
import triton_python_backend_utils as pb_utils


def _values(array):
    if array.dtype == object:
        return [v.decode() if isinstance(v, bytes) else str(v) for v in array.reshape(-1)]
    return array.reshape(-1).tolist()


class TritonPythonModel:
    def initialize(self, args):
        self.batching = json.loads(args["model_config"])["max_batch_size"] > 0

    def execute(self, requests):
        responses = []
        for request in requests:
            described = {
                t.name(): [str(t.as_numpy().dtype), list(t.as_numpy().shape), _values(t.as_numpy())]
                for t in request.inputs()
            }
            text = json.dumps(described).encode()
            data = np.array([[text]] if self.batching else [text], dtype=object)
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("DESC", data)]))
        return responses
