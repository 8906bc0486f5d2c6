"""An ordinary (not decoupled) model written with coroutines: ``async def
initialize/execute/finalize``. Y = 2 * X; PID says which instance answered."""

import asyncio
import os

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    async def initialize(self, args):
        await asyncio.sleep(0)
        self.factor = np.float32(2)

    async def execute(self, requests):
        await asyncio.sleep(0.01)  # long enough that both instances get batches
        responses = []
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "X").as_numpy()
            pid = np.full((x.shape[0], 1), os.getpid(), dtype=np.int64)
            responses.append(
                pb_utils.InferenceResponse(
                    [pb_utils.Tensor("Y", x * self.factor), pb_utils.Tensor("PID", pid)]
                )
            )
        return responses

    async def finalize(self):
        await asyncio.sleep(0)
        print("async_plain finalized", flush=True)
