"""Ensembles without processes: readiness, and steps sent through the submitter given.

Load order and dependencies are the manager's (``service/lifecycle/dependencies.py``), shown by
``tests/integration/test_model_dependencies.py`` and the explicit-mode ensemble tests."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from tritium.core import Completion, InferRequest, InputTensor
from tritium.core.errors import NotFound
from tritium.scheduling.ensemble_plan import build_plan
from tritium.service.composition.ensembles import EnsembleVersion

T = {"data_type": "TYPE_FP32", "dims": [2]}
STEP = {
    "name": "m",
    "max_batch_size": 0,
    "input": [{"name": "X", **T}],
    "output": [{"name": "Y", **T}],
}
CONFIG = {
    "name": "e",
    "max_batch_size": 0,
    "input": [{"name": "IN", **T}],
    "output": [{"name": "OUT", **T}],
    "ensemble_scheduling": {
        "step": [
            {
                "model_name": "m",
                "model_version": -1,
                "input_map": {"X": "IN"},
                "output_map": {"Y": "t"},
            },
            {
                "model_name": "n",
                "model_version": 2,
                "input_map": {"X": "t"},
                "output_map": {"Y": "OUT"},
            },
        ]
    },
}


class FakeTable:
    def __init__(self) -> None:
        self.ready = {("m", ""): True, ("n", "2"): True}

    def get(self, name: str, version: str = "") -> SimpleNamespace:
        if (name, version) not in self.ready:
            raise NotFound(f"unknown model {name}")
        return SimpleNamespace(ready=self.ready[(name, version)], config=dict(STEP, name=name))


def _refuse(request: InferRequest, stream: object = None) -> Completion:
    raise AssertionError("no step is submitted here")


def test_ready_only_while_every_composing_model_is():
    manager = FakeTable()
    plan = build_plan(CONFIG, lambda n, v: manager.get(n, v).config)
    version = EnsembleVersion(_refuse, manager, "e", 1, CONFIG, plan)  # type: ignore[arg-type]
    assert version.ready and version.instances == []
    manager.ready[("n", "2")] = False  # e.g. its only instance is restarting
    assert not version.ready
    manager.ready[("n", "2")] = True
    del manager.ready[("m", "")]  # unloaded
    assert not version.ready


def test_steps_go_through_the_submitter_it_was_given():
    manager = FakeTable()
    plan = build_plan(CONFIG, lambda n, v: manager.get(n, v).config)
    sent: list[InferRequest] = []

    def submit_step(request: InferRequest, stream: object = None) -> Completion:
        sent.append(request)
        return Completion()

    version = EnsembleVersion(submit_step, manager, "e", 1, CONFIG, plan)  # type: ignore[arg-type]
    data = np.zeros(2, np.float32)
    done = version.scheduler.submit(
        InferRequest("e", inputs=[InputTensor("IN", "FP32", (2,), data)])
    )
    assert not done.done()
    assert [(r.model_name, r.model_version) for r in sent] == [("m", "")]
