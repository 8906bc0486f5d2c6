"""BLS test model: calls the model named by the "target" parameter (see config.pbtxt)."""

import asyncio
import json
import time

import numpy as np
import triton_python_backend_utils as pb_utils


async def _side_by_side(target, x, timeout_us, count):
    calls = [_call(target, x + i, timeout_us, False).async_exec() for i in range(count)]
    return await asyncio.gather(*calls)


def _call(target, x, timeout_us, name_as_bytes):
    return pb_utils.InferenceRequest(
        model_name=target.encode() if name_as_bytes else target,
        inputs=[pb_utils.Tensor("X", x)],
        requested_output_names=["Y"],
        timeout=timeout_us,
    )


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            params = json.loads(request.parameters())
            target = params.get("target", "ens_double")
            mode = params.get("mode", "sync")
            count = int(params.get("count", 1))
            timeout_us = int(params.get("timeout_us", 0))
            x = pb_utils.get_input_tensor_by_name(request, "X").as_numpy()
            start = time.monotonic()
            if mode in ("ready", "load", "unload"):
                if mode == "load":
                    pb_utils.load_model(target)
                elif mode == "unload":
                    pb_utils.unload_model(target)
                info = json.dumps({"ready": pb_utils.is_model_ready(target)})
                responses.append(pb_utils.InferenceResponse([
                    pb_utils.Tensor("Y", x), pb_utils.Tensor("INFO", np.array([info.encode()], object))]))
                continue
            if mode == "async":
                # No `async def execute` here: run an event loop of our own and await
                # the calls side by side.
                answers = asyncio.run(_side_by_side(target, x, timeout_us, count))
            else:
                answers = [_call(target, x, timeout_us, True).exec() for _ in range(count)]
            elapsed = time.monotonic() - start
            errors = [a.error().message() for a in answers if a.has_error()]
            if errors:
                responses.append(pb_utils.InferenceResponse(error=pb_utils.TritonError(errors[0])))
                continue
            ys = [pb_utils.get_output_tensor_by_name(a, "Y").as_numpy() for a in answers]
            info = json.dumps({"elapsed": elapsed, "sums": [float(y.sum()) for y in ys]})
            responses.append(pb_utils.InferenceResponse([
                pb_utils.Tensor("Y", ys[0]),
                pb_utils.Tensor("INFO", np.array([info.encode()], object)),
            ]))
        return responses
