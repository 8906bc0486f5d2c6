"""An ordinary model written with coroutines: Y = 2 * X, from ``async def execute``.

(Triton 2.51 awaits ``async def execute`` but not ``async def initialize``; later
versions await both, as tritium does, so nothing here depends on initialize.)
"""

import asyncio

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    factor = 2

    async def execute(self, requests):
        await asyncio.sleep(0.001)
        responses = []
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "X").as_numpy()
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("Y", x * self.factor)]))
        return responses
