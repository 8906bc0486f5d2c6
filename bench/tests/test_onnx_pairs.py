"""The ONNX bench pairs each round's tritium measurement with Triton's of that round."""

from __future__ import annotations

import pytest
from bench.measurement import Measurement
from bench.onnx_mlp import paired


def test_a_failed_round_is_left_out_and_the_others_stay_paired() -> None:
    ours = [Measurement(100.0), Measurement(error="refused"), Measurement(300.0)]
    theirs = [Measurement(10.0), Measurement(20.0), Measurement(30.0)]
    assert paired(ours, theirs) == [(100.0, 10.0), (300.0, 30.0)]
    theirs[2] = Measurement(error="died")
    assert paired(ours, theirs) == [(100.0, 10.0)]


def test_rounds_of_unequal_count_are_an_error() -> None:
    with pytest.raises(ValueError):
        paired([Measurement(1.0)], [])
