"""A decoupled model with ``async def execute``: COUNT responses 10 ms apart, then
the final flag; requests run concurrently on the worker's event loop."""

import asyncio

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    async def initialize(self, args):
        await asyncio.sleep(0)
        self.ready = True

    async def execute(self, requests):
        await asyncio.gather(*(self.answer(request) for request in requests))

    async def answer(self, request):
        count = int(pb_utils.get_input_tensor_by_name(request, "COUNT").as_numpy()[0])
        sender = request.get_response_sender()
        for i in range(count):
            await asyncio.sleep(0.01)
            if sender.is_cancelled():
                break
            index = pb_utils.Tensor("INDEX", np.array([i], dtype=np.int32))
            sender.send(pb_utils.InferenceResponse([index]))
        sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
