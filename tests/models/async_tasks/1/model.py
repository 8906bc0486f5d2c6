"""An ordinary model whose coroutines use what asyncio code relies on inside a task:
``asyncio.timeout``, ``current_task``, tasks that outlive one ``execute``, and errors.

X = 1 answers Y = 1; X = 2 raises; X = 3 waits past a 250 ms ``asyncio.timeout`` (a
TimeoutError: an error response; the margin leaves room for a busy machine's delays to the
2 ms sleep of the other values); any other X answers X. TICKS counts the beats of a
background task started in ``initialize`` that goes on between executions.
"""

import asyncio

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    async def initialize(self, args):
        self.ticks = 0
        self.beat = asyncio.get_running_loop().create_task(self._beat())

    async def _beat(self):
        while True:
            self.ticks += 1
            await asyncio.sleep(0.001)

    async def execute(self, requests):
        assert asyncio.current_task() is not None
        responses = []
        for request in requests:
            x = int(pb_utils.get_input_tensor_by_name(request, "X").as_numpy()[0, 0])
            if x == 2:
                raise ValueError("asked to fail")
            async with asyncio.timeout(0.25):
                if x == 3:
                    await asyncio.sleep(5)
                await asyncio.sleep(0.002)
            responses.append(
                pb_utils.InferenceResponse(
                    [
                        pb_utils.Tensor("Y", np.array([[x]], np.int32)),
                        pb_utils.Tensor("TICKS", np.array([[self.ticks]], np.int32)),
                    ]
                )
            )
        return responses

    async def finalize(self):
        self.beat.cancel()
        await asyncio.sleep(0)
        print(f"async_tasks finalized after {self.ticks} ticks", flush=True)
