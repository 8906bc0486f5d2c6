"""The ensemble plan: graph checks at load, each refusal naming the step and the tensor."""

from __future__ import annotations

from typing import Any

import pytest

from tritium.config import ConfigError
from tritium.scheduling.ensemble_plan import build_plan

ADD_SUB = {
    "name": "add_sub",
    "max_batch_size": 0,
    "input": [
        {"name": "INPUT0", "data_type": "TYPE_FP32", "dims": [4]},
        {"name": "INPUT1", "data_type": "TYPE_FP32", "dims": [4]},
    ],
    "output": [
        {"name": "OUTPUT0", "data_type": "TYPE_FP32", "dims": [4]},
        {"name": "OUTPUT1", "data_type": "TYPE_FP32", "dims": [4]},
    ],
}
BATCHED = {
    "name": "batched",
    "max_batch_size": 4,
    "input": [{"name": "X", "data_type": "TYPE_FP32", "dims": [-1]}],
    "output": [{"name": "Y", "data_type": "TYPE_FP32", "dims": [-1]}],
}
MODELS = {"add_sub": ADD_SUB, "batched": BATCHED}


def lookup(name: str, version: str) -> dict[str, Any] | None:
    if version not in ("", "1"):
        return None
    return MODELS.get(name)


def step(model: str, inputs: dict[str, str], outputs: dict[str, str], version: int = -1) -> dict:
    return {
        "model_name": model,
        "model_version": version,
        "input_map": inputs,
        "output_map": outputs,
    }


def ensemble(steps: list[dict], *, inputs=None, outputs=None, max_batch_size: int = 0) -> dict:  # noqa: ANN001
    fp32 = [4]
    return {
        "name": "ens",
        "platform": "ensemble",
        "max_batch_size": max_batch_size,
        "input": inputs
        or [{"name": n, "data_type": "TYPE_FP32", "dims": fp32} for n in ("A", "B")],
        "output": outputs or [{"name": "OUT", "data_type": "TYPE_FP32", "dims": fp32}],
        "ensemble_scheduling": {"step": steps},
    }


def add_sub(a: str, b: str, out0: str, out1: str | None = None) -> dict:
    outputs = {"OUTPUT0": out0}
    if out1 is not None:
        outputs["OUTPUT1"] = out1
    return step("add_sub", {"INPUT0": a, "INPUT1": b}, outputs)


def refusal(config: dict) -> str:
    with pytest.raises(ConfigError) as info:
        build_plan(config, lookup)
    return info.value.message


def test_two_step_chain_waits_for_the_first_step():
    plan = build_plan(ensemble([add_sub("A", "B", "s", "d"), add_sub("s", "d", "OUT")]), lookup)
    assert plan.first_steps == (0,)
    assert plan.waits == (0, 2)  # step 1 waits for two tensors of step 0
    assert plan.consumers["s"] == (1,) and plan.consumers["A"] == (0,)


def test_diamond_branches_both_start_at_once_and_steps_may_be_listed_in_any_order():
    config = ensemble([add_sub("x", "y", "OUT"), add_sub("A", "B", "x"), add_sub("B", "A", "y")])
    plan = build_plan(config, lookup)
    assert plan.first_steps == (1, 2)
    assert plan.waits == (2, 0, 0)


def test_unknown_model_names_the_step():
    message = refusal(ensemble([add_sub("A", "B", "OUT"), step("nope", {"X": "A"}, {"Y": "z"})]))
    assert message == (
        "ensemble ens contains models that are not available or ambiguous: nope (step 1)"
    )


def test_unknown_version_is_not_available():
    message = refusal(
        ensemble([step("add_sub", {"INPUT0": "A", "INPUT1": "B"}, {"OUTPUT0": "OUT"}, 3)])
    )
    assert "add_sub version 3 (step 0)" in message


def test_tensor_produced_twice_names_both_producers():
    message = refusal(ensemble([add_sub("A", "B", "OUT"), add_sub("A", "B", "OUT")]))
    assert message == (
        "ensemble tensor 'OUT' can appear in an output map only once for ensemble 'ens' step 1 "
        "(already produced by step 0 (model 'add_sub') output 'OUTPUT0')"
    )


def test_an_ensemble_input_cannot_be_produced_again():
    message = refusal(ensemble([add_sub("A", "B", "OUT", "A")]))
    assert "ensemble tensor 'A' can appear in an output map only once" in message
    assert "ensemble input 'A'" in message


def test_input_never_produced_names_step_input_and_tensor():
    message = refusal(ensemble([add_sub("A", "ghost", "OUT")]))
    assert message == (
        "in ensemble 'ens', step 0 (model 'add_sub'): input 'INPUT1' reads ensemble tensor "
        "'ghost', which no step produces and is not an ensemble input"
    )


def test_ensemble_output_never_produced():
    message = refusal(ensemble([add_sub("A", "B", "other")]))
    assert message == "in ensemble 'ens', ensemble output 'OUT' is not produced by any step"


def test_cycle_is_named_with_its_steps_and_a_tensor():
    config = ensemble([add_sub("A", "y", "x", "OUT"), add_sub("x", "B", "y")])
    message = refusal(config)
    assert message.startswith("in ensemble 'ens', steps form a cycle through ensemble tensor")
    assert "step 0 (model 'add_sub') -> step 1 (model 'add_sub')" in message or (
        "step 1 (model 'add_sub') -> step 0 (model 'add_sub')" in message
    )


def test_datatype_mismatch_between_producer_and_consumer():
    inputs = [
        {"name": "A", "data_type": "TYPE_INT32", "dims": [4]},
        {"name": "B", "data_type": "TYPE_FP32", "dims": [4]},
    ]
    message = refusal(ensemble([add_sub("A", "B", "OUT")], inputs=inputs))
    assert message == (
        "in ensemble 'ens', ensemble tensor 'A': inconsistent data type: TYPE_INT32 is "
        "inferred from ensemble input 'A' while TYPE_FP32 is inferred from step 0 "
        "(model 'add_sub') input 'INPUT0'"
    )


def test_shape_mismatch_between_steps():
    config = ensemble(
        [add_sub("A", "B", "t"), step("batched", {"X": "t"}, {"Y": "OUT"})],
    )
    message = refusal(config)
    assert "ensemble tensor 't': inconsistent shape: [4] is inferred from step 0" in message
    assert "while [-1,-1] is inferred from step 1 (model 'batched') input 'X'" in message


def test_shape_mismatch_with_the_ensemble_output():
    outputs = [{"name": "OUT", "data_type": "TYPE_FP32", "dims": [5]}]
    message = refusal(ensemble([add_sub("A", "B", "OUT")], outputs=outputs))
    assert "inconsistent shape: [4] is inferred from step 0 (model 'add_sub') output" in message
    assert "while [5] is inferred from ensemble output 'OUT'" in message


def test_batching_ensemble_needs_steps_that_batch_as_far():
    inputs = [{"name": "A", "data_type": "TYPE_FP32", "dims": [-1]}]
    outputs = [{"name": "OUT", "data_type": "TYPE_FP32", "dims": [-1]}]
    ok = ensemble(
        [step("batched", {"X": "A"}, {"Y": "OUT"})],
        inputs=inputs,
        outputs=outputs,
        max_batch_size=4,
    )
    assert build_plan(ok, lookup).first_steps == (0,)
    ok["max_batch_size"] = 8
    assert "only allows maximum batch size 4" in refusal(ok)


def test_unmapped_required_input_and_unknown_map_keys():
    assert "model input 'INPUT1' is not mapped" in refusal(
        ensemble([step("add_sub", {"INPUT0": "A"}, {"OUTPUT0": "OUT"})])
    )
    assert "input_map key 'NOPE' is not an input" in refusal(
        ensemble([step("add_sub", {"INPUT0": "A", "INPUT1": "B", "NOPE": "A"}, {"OUTPUT0": "OUT"})])
    )
    assert "output_map key 'NOPE' is not an output" in refusal(
        ensemble([step("add_sub", {"INPUT0": "A", "INPUT1": "B"}, {"NOPE": "OUT"})])
    )
