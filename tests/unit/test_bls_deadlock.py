"""Which model versions a set of waiting BLS calls leaves stuck for good (no processes)."""

from __future__ import annotations

from tritium.service.composition.bls import stuck_models

COUNTS = {"a:1": 1, "b:1": 1, "pool:1": 2, "slow:1": 1}


def stuck(waiting):  # noqa: ANN001, ANN202
    return stuck_models(waiting, lambda label: COUNTS.get(label, 0))


def test_a_model_waiting_on_itself_with_its_only_instance_is_stuck():
    assert stuck({"a:1": {1: [["a:1"]]}}) == {"a:1"}


def test_two_models_waiting_on_each_other_are_stuck():
    assert stuck({"a:1": {1: [["b:1"]]}, "b:1": {2: [["a:1"]]}}) == {"a:1", "b:1"}


def test_a_chain_that_ends_in_a_working_model_is_not_stuck():
    # a waits on b, b on slow; slow is computing (waits on nothing): all will finish.
    assert stuck({"a:1": {1: [["b:1"]]}, "b:1": {2: [["slow:1"]]}}) == set()


def test_a_model_with_a_free_instance_is_not_stuck():
    # One of pool's two instances waits on pool itself: the other one serves it.
    assert stuck({"pool:1": {1: [["pool:1"]]}}) == set()
    # Both waiting on pool: nobody is left to serve either call.
    assert stuck({"pool:1": {1: [["pool:1"]], 2: [["pool:1"]]}}) == {"pool:1"}


def test_a_worker_with_one_stuck_call_among_several_is_stuck():
    # async_exec: the worker waits on both calls; the one to itself never completes.
    assert stuck({"a:1": {1: [["slow:1"], ["a:1"]]}}) == {"a:1"}


def test_an_ensemble_call_is_stuck_when_any_of_its_step_models_is():
    # The ensemble's step on a:1 needs a's only instance, which waits on the ensemble.
    assert stuck({"a:1": {1: [["slow:1", "a:1"]]}}) == {"a:1"}
    assert stuck({"a:1": {1: [["slow:1", "b:1"]]}}) == set()
    waiting = {"a:1": {1: [["slow:1", "b:1"]]}, "b:1": {2: [["a:1"]]}}
    assert stuck(waiting) == {"a:1", "b:1"}
