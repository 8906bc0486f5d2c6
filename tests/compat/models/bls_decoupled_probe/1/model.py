"""BLS to a decoupled model, reported so both servers' answers can be compared.

``text_input`` is JSON: ``how`` is ``sync`` (``for`` over ``exec(decoupled=True)``),
``async`` (``for`` over ``await async_exec(decoupled=True)``), ``plain`` (``exec()``
without decoupled) or ``add_sub`` (``exec(decoupled=True)`` on add_sub, not decoupled);
``text`` goes to decoupled_echo. The answer lists each response the call gave.
"""

import json

import numpy as np
import triton_python_backend_utils as pb_utils


def _echo(text):
    return pb_utils.InferenceRequest(
        model_name="decoupled_echo",
        inputs=[pb_utils.Tensor("text_input", np.array([text.encode()], np.object_))],
        requested_output_names=["text_output"],
    )


def _add_sub():
    x = np.arange(4, dtype=np.float32)
    return pb_utils.InferenceRequest(
        model_name="add_sub",
        inputs=[pb_utils.Tensor("INPUT0", x), pb_utils.Tensor("INPUT1", x)],
        requested_output_names=["OUTPUT0", "OUTPUT1"],
    )


def _describe(response):
    if response.has_error():
        return {"error": response.error().message()}
    outputs = {}
    for tensor in response.output_tensors():
        value = tensor.as_numpy().tolist()
        outputs[tensor.name()] = [v.decode() if isinstance(v, bytes) else v for v in value]
    return {"outputs": outputs}


class TritonPythonModel:
    async def execute(self, requests):
        responses = []
        for request in requests:
            raw = pb_utils.get_input_tensor_by_name(request, "text_input").as_numpy()[0]
            command = json.loads(raw)
            how, text = command["how"], command.get("text", "")
            report = {}
            if how == "sync":
                got = _echo(text).exec(decoupled=True)
            elif how == "async":
                got = await _echo(text).async_exec(decoupled=True)
            elif how == "add_sub":
                got = _add_sub().exec(decoupled=True)
            else:
                got = [_echo(text).exec()]
            report["type"] = type(got).__name__ if how != "plain" else "list"
            report["responses"] = [_describe(r) for r in got]
            out = pb_utils.Tensor("text_output", np.array([json.dumps(report).encode()], object))
            responses.append(pb_utils.InferenceResponse([out]))
        return responses
