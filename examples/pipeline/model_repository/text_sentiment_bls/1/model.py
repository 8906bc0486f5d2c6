"""The text_sentiment pipeline written with BLS: ``preprocess`` and ``sentiment`` are called
through the server, post-processing runs here.

Every request of the batch is sent at once with ``async_exec`` (the called models batch
them), and there is Python logic between the steps, which is what BLS is for: a text
without a single word skips the model and is neutral.
"""

import asyncio

import numpy as np
import triton_python_backend_utils as pb_utils

LABELS = np.array([b"negative", b"neutral", b"positive"], dtype=object)
NEUTRAL = 1


def _call(model, name, tensor, output):
    return pb_utils.InferenceRequest(
        model_name=model,
        inputs=[pb_utils.Tensor(name, tensor)],
        requested_output_names=[output],
    ).async_exec()


def _output(answer, name):
    if answer.has_error():
        raise pb_utils.TritonModelException(answer.error().message())
    return pb_utils.get_output_tensor_by_name(answer, name).as_numpy()


async def _pipeline(texts):
    """One (label, score) pair of arrays per request."""
    answers = await asyncio.gather(*(_call("preprocess", "TEXT", t, "FEATURES") for t in texts))
    features = [_output(a, "FEATURES") for a in answers]
    answers = await asyncio.gather(
        *(_call("sentiment", "FEATURES", f, "LOGITS") for f in features)
    )
    results = []
    for rows, answer in zip(features, answers):
        logits = _output(answer, "LOGITS")
        exp = np.exp(logits - logits.max(axis=1, keepdims=True))
        probabilities = exp / exp.sum(axis=1, keepdims=True)
        best = probabilities.argmax(axis=1)
        score = probabilities[np.arange(len(best)), best]
        empty = rows[:, 2] == 0  # no words: neutral, whatever the model says
        best[empty] = NEUTRAL
        score[empty] = 1.0
        results.append((LABELS[best].reshape(-1, 1), score.reshape(-1, 1).astype(np.float32)))
    return results


class TritonPythonModel:
    def execute(self, requests):
        texts = [pb_utils.get_input_tensor_by_name(r, "TEXT").as_numpy() for r in requests]
        try:
            # A model with `async def execute` would simply await _pipeline(texts).
            results = asyncio.run(_pipeline(texts))
        except pb_utils.TritonModelException as exc:
            error = pb_utils.TritonError(str(exc))
            return [pb_utils.InferenceResponse(error=error) for _ in requests]
        return [
            pb_utils.InferenceResponse(
                [pb_utils.Tensor("LABEL", label), pb_utils.Tensor("SCORE", score)]
            )
            for label, score in results
        ]
