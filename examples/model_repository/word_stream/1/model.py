"""An LLM-shaped decoupled model: it "generates" a reply to ``text_input`` one word at a
time and streams each word as its own response, then marks the request final.

``async def execute`` lets many requests stream at once on one instance. The request
parameter ``max_tokens`` (default 16) caps the reply; ``delay_ms`` (default 20) is the
pause per word. A client that goes away cancels the request, and generation stops.
"""

import asyncio
import json

import numpy as np
import triton_python_backend_utils as pb_utils

REPLY = (
    "Thank you for asking. Here is an answer streamed word by word, the way a language "
    "model sends its tokens while it is still thinking about the next ones."
)


class TritonPythonModel:
    async def execute(self, requests):
        # Decoupled: answer through each request's response sender, return nothing.
        await asyncio.gather(*(self.generate(request) for request in requests))

    async def generate(self, request):
        sender = request.get_response_sender()
        params = json.loads(request.parameters())
        max_tokens = int(params.get("max_tokens", 16))
        delay = int(params.get("delay_ms", 20)) / 1000
        prompt = pb_utils.get_input_tensor_by_name(request, "text_input").as_numpy()[0]
        words = [f"You said: {prompt.decode(errors='replace')}."] + REPLY.split()
        for i, word in enumerate(words[:max_tokens]):
            if sender.is_cancelled():
                break
            await asyncio.sleep(delay)
            text = word if i == 0 else " " + word
            output = pb_utils.Tensor("text_output", np.array([text.encode()], dtype=np.object_))
            sender.send(pb_utils.InferenceResponse([output]))
        sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
