"""BLS test model for decoupled targets: ``exec(decoupled=True)`` and
``async_exec(decoupled=True)`` from ``async def execute``.

"how" picks the call: ``sync`` (``for`` over ``exec(decoupled=True)``), ``async`` (``for``
over ``await async_exec(decoupled=True)``, two calls side by side), ``aiter`` (``async
for``), ``plain`` (``exec()`` without decoupled), ``drop`` (take "take" responses, drop the
iterator, then ask the target what it saw), ``cancel`` (take "take", ``cancel()``, read on),
``stall`` (take one, stop reading for a while, read on). With "note" (and for drop and
cancel), INFO also says what decoupled_words noted of its slow stream. INFO is a JSON
report.
"""

import asyncio
import json
import time

import numpy as np
import triton_python_backend_utils as pb_utils

OUTPUTS = {"decoupled_words": ["INDEX", "WORD"], "decoupled_async": ["INDEX"]}


def _request(target, count, mode, timeout_us=0):
    if target in OUTPUTS:
        inputs = [pb_utils.Tensor("COUNT", np.array([count], np.int32))]
    else:  # a model that is not decoupled, such as ens_slow_inc: X = [[COUNT]], Y back
        inputs = [pb_utils.Tensor("X", np.array([[count]], np.float32))]
    return pb_utils.InferenceRequest(
        model_name=target,
        inputs=inputs,
        requested_output_names=OUTPUTS.get(target, ["Y"]),
        parameters={"mode": mode},
        timeout=timeout_us,
    )


class Report:
    def __init__(self):
        self.indexes, self.words, self.ys, self.errors, self.empty = [], [], [], [], 0

    def add(self, response):
        if response.has_error():
            self.errors.append(response.error().message())
            return
        if not response.output_tensors():
            self.empty += 1
            return
        y = pb_utils.get_output_tensor_by_name(response, "Y")
        if y is not None:
            self.ys.append(y.as_numpy().tolist())
            return
        index = pb_utils.get_output_tensor_by_name(response, "INDEX")
        self.indexes.append(int(index.as_numpy()[0]))
        word = pb_utils.get_output_tensor_by_name(response, "WORD")
        if word is not None:
            self.words.append(word.as_numpy()[0].decode())

    def as_dict(self):
        return {"indexes": self.indexes, "words": self.words, "ys": self.ys,
                "errors": self.errors, "empty": self.empty}


def _target_note(target):
    """What decoupled_words noted about its last slow stream (waits until it noted it)."""
    deadline = time.monotonic() + 10
    while True:
        report = Report()
        for response in _request(target, 0, "report").exec(decoupled=True):
            report.add(response)
        note = report.words[0] if report.words else ""
        if note.startswith("cancelled") or time.monotonic() > deadline:
            return note
        time.sleep(0.02)


class TritonPythonModel:
    async def execute(self, requests):
        responses = []
        for request in requests:
            params = json.loads(request.parameters())
            count = int(pb_utils.get_input_tensor_by_name(request, "COUNT").as_numpy()[0])
            info = await self.run(params, count)
            responses.append(pb_utils.InferenceResponse(
                [pb_utils.Tensor("INFO", np.array([json.dumps(info).encode()], object))]))
        return responses

    async def run(self, params, count):
        target = params.get("target", "decoupled_words")
        mode = params.get("mode", "final_alone")
        how = params.get("how", "sync")
        take = int(params.get("take", 1))
        timeout_us = int(params.get("timeout_us", 0))
        report = Report()
        info = {}
        noted = params.get("note") or how in ("drop", "cancel")
        if noted:
            # A slow stream of no responses notes "completed" before its final response.
            for _ in _request(target, 0, "slow").exec(decoupled=True):
                pass
        start = time.monotonic()
        if how == "sync":
            for response in _request(target, count, mode, timeout_us).exec(decoupled=True):
                report.add(response)
        elif how == "plain":
            report.add(_request(target, count, mode, timeout_us).exec())
        elif how == "async":
            calls = [_request(target, count, mode, timeout_us).async_exec(decoupled=True)
                     for _ in range(2)]
            iterators = await asyncio.gather(*calls)
            info["type"] = type(iterators[0]).__name__
            for iterator in iterators:
                for response in iterator:
                    report.add(response)
        elif how == "aiter":
            iterator = await _request(target, count, mode, timeout_us).async_exec(decoupled=True)
            async for response in iterator:
                report.add(response)
        elif how == "drop":
            iterator = _request(target, count, mode).exec(decoupled=True)
            for _ in range(take):
                report.add(next(iterator))
            del iterator
        elif how == "cancel":
            iterator = _request(target, count, mode).exec(decoupled=True)
            for _ in range(take):
                report.add(next(iterator))
            iterator.cancel()
            for response in iterator:
                report.add(response)
        elif how == "stall":
            iterator = _request(target, count, mode).exec(decoupled=True)
            report.add(next(iterator))
            time.sleep(float(params.get("stall_s", 1.0)))
            for response in iterator:
                report.add(response)
        info["elapsed"] = time.monotonic() - start
        if noted:
            info["note"] = _target_note(target)
        info.update(report.as_dict())
        return info
