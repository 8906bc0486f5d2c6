"""The ensemble scheduler shell, driven by a fake step submitter (no processes, no loop)."""

from __future__ import annotations

import numpy as np
import pytest

from tritium.core import Completion, InferRequest, InferResponse, InputTensor, RequestedOutput
from tritium.core.errors import InternalError, InvalidArgument
from tritium.core.types import OutputTensor
from tritium.scheduling.ensemble import EnsembleScheduler
from tritium.scheduling.ensemble_plan import build_plan

STEP_MODEL = {
    "name": "inc",
    "max_batch_size": 0,
    "input": [{"name": "X", "data_type": "TYPE_FP32", "dims": [2]}],
    "output": [
        {"name": "Y", "data_type": "TYPE_FP32", "dims": [2]},
        {"name": "Z", "data_type": "TYPE_FP32", "dims": [2]},
    ],
}
JOIN = {
    "name": "join",
    "max_batch_size": 0,
    "input": [
        {"name": "A", "data_type": "TYPE_FP32", "dims": [2]},
        {"name": "B", "data_type": "TYPE_FP32", "dims": [2]},
    ],
    "output": [{"name": "S", "data_type": "TYPE_FP32", "dims": [2]}],
}
T = {"data_type": "TYPE_FP32", "dims": [2]}
DIAMOND = {
    "name": "diamond",
    "max_batch_size": 0,
    "input": [{"name": "IN", **T}],
    "output": [{"name": "OUT", **T}, {"name": "LEFT", **T}],
    "ensemble_scheduling": {
        "step": [
            {
                "model_name": "inc",
                "model_version": -1,
                "input_map": {"X": "IN"},
                "output_map": {"Y": "LEFT"},
            },
            {
                "model_name": "inc",
                "model_version": -1,
                "input_map": {"X": "IN"},
                "output_map": {"Y": "RIGHT"},
            },
            {
                "model_name": "join",
                "model_version": -1,
                "input_map": {"A": "LEFT", "B": "RIGHT"},
                "output_map": {"S": "OUT"},
            },
        ]
    },
}


class FakeSteps:
    """Records step requests; the test settles each one."""

    def __init__(self) -> None:
        self.pending: list[tuple[InferRequest, Completion]] = []

    def __call__(self, request: InferRequest) -> Completion:
        done: Completion = Completion()
        self.pending.append((request, done))
        return done

    def answer(self, index: int = 0, add: float = 1.0) -> None:
        request, done = self.pending.pop(index)
        x = [t.data for t in request.inputs]
        value = sum(x) + add
        outputs = [OutputTensor(o.name, "FP32", value.shape, value) for o in request.outputs]
        done.set_result(InferResponse(request.model_name, "1", request.id, outputs))


def make(steps: FakeSteps) -> EnsembleScheduler:
    models = {"inc": STEP_MODEL, "join": JOIN}
    return EnsembleScheduler(build_plan(DIAMOND, lambda n, v: models.get(n)), steps)


def request(outputs: list[str] | None = None) -> InferRequest:
    data = np.array([1.0, 2.0], np.float32)
    return InferRequest(
        "diamond",
        id="r1",
        inputs=[InputTensor("IN", "FP32", (2,), data)],
        outputs=None if outputs is None else [RequestedOutput(n) for n in outputs],
        parameters={"p": 1},
    )


def test_branches_start_together_and_the_join_waits_for_both():
    steps = FakeSteps()
    done = make(steps).submit(request())
    assert [r.model_name for r, _ in steps.pending] == ["inc", "inc"]
    first, _ = steps.pending[0]
    assert first.id == "r1" and first.parameters == {"p": 1}
    assert [o.name for o in first.outputs] == ["Y"]
    steps.answer(0)
    assert len(steps.pending) == 1 and not done.done()  # the join still waits for RIGHT
    steps.answer(0)
    join, _ = steps.pending[0]
    assert join.model_name == "join" and [t.name for t in join.inputs] == ["A", "B"]
    steps.answer(0, add=0.0)
    response = done.result()
    assert [o.name for o in response.outputs] == ["OUT", "LEFT"]
    np.testing.assert_array_equal(response.outputs[0].data, [4.0, 6.0])
    np.testing.assert_array_equal(response.outputs[1].data, [2.0, 3.0])


def test_requested_outputs_only():
    steps = FakeSteps()
    done = make(steps).submit(request(["LEFT"]))
    steps.answer(0)
    steps.answer(0)
    steps.answer(0)
    assert [o.name for o in done.result().outputs] == ["LEFT"]


def test_a_failing_step_fails_the_request_and_cancels_the_other_branch():
    steps = FakeSteps()
    done = make(steps).submit(request())
    failing, other = steps.pending[0][1], steps.pending[1][1]
    response = InferResponse("inc", "1", error=InternalError("boom in step"))
    failing.set_result(response)
    assert isinstance(done.exception(), InternalError)
    assert str(done.exception().message) == "boom in step"
    assert other.cancelled()


def test_a_step_refused_at_submit_fails_the_request():
    def refuse(request: InferRequest) -> Completion:
        raise InvalidArgument("no such model")

    scheduler = EnsembleScheduler(make(FakeSteps()).plan, refuse)
    done = scheduler.submit(request())
    assert done.exception().message == "no such model"
    assert scheduler.statistics().in_flight == 0


def test_cancelling_the_request_cancels_running_steps_and_starts_no_more():
    steps = FakeSteps()
    scheduler = make(steps)
    done = scheduler.submit(request())
    left = steps.pending[0][1]
    done.cancel()
    assert left.cancelled() and steps.pending[1][1].cancelled()
    assert scheduler.statistics().in_flight == 0


def test_unloading_fails_requests_in_progress():
    steps = FakeSteps()
    scheduler = make(steps)
    done = scheduler.submit(request())
    scheduler.fail_all(InternalError("unloading"))
    with pytest.raises(InternalError):
        done.result()


def test_only_a_tensor_one_step_alone_reads_may_be_read_in_place():
    """IN (a client input read by two steps) and LEFT (also an ensemble output) must stay
    as they are; RIGHT is read by the join alone, whose worker may read it in place."""
    steps = FakeSteps()
    scheduler = make(steps)
    x = np.array([1, 2], np.float32)
    done = scheduler.submit(InferRequest("diamond", "", "r", [InputTensor("IN", "FP32", (2,), x)]))
    first = [request for request, _ in steps.pending]
    assert all(r.ensemble_step for r in first)
    assert [r.movable_inputs for r in first] == [(False,), (False,)]
    steps.answer()
    steps.answer()
    ((join, _),) = steps.pending
    assert [t.name for t in join.inputs] == ["A", "B"]
    assert join.movable_inputs == (False, True)
    steps.answer()
    outputs = {o.name: o.data for o in done.result().outputs}
    np.testing.assert_array_equal(outputs["LEFT"], x + 1)
    np.testing.assert_array_equal(outputs["OUT"], 2 * x + 3)
    assert not InferRequest("m").ensemble_step  # a client's request
