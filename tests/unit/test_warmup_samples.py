"""Warm-up samples built from ``model_warmup``: shapes, data kinds, file confinement."""

from __future__ import annotations

import numpy as np
import pytest

from tritium.core.errors import InvalidArgument
from tritium.service.lifecycle.warmup import build_samples


def _config(inputs: dict, max_batch_size: int = 0, **sample: object) -> dict:
    return {
        "max_batch_size": max_batch_size,
        "model_warmup": [{"name": "s", "batch_size": 0, "count": 0, "inputs": inputs, **sample}],
    }


def test_zero_data_with_and_without_batching(tmp_path):
    spec = {"X": {"data_type": "TYPE_FP32", "dims": ["2", "3"], "zero_data": True}}
    (sample,) = build_samples(_config(spec), tmp_path)
    assert (sample.batch_size, sample.count) == (1, 1)  # 0 means once, one request
    name, datatype, shape, data = sample.inputs[0]
    assert (name, datatype, shape) == ("X", "FP32", (2, 3))
    assert data.dtype == np.float32 and not data.any()
    (batched,) = build_samples(_config(spec, max_batch_size=8, batch_size=4, count=2), tmp_path)
    assert batched.inputs[0][2] == (1, 2, 3)
    assert (batched.batch_size, batched.count) == (4, 2)
    assert len(batched.requests("m", "1")) == 4


def test_random_and_string_data(tmp_path):
    spec = {
        "R": {"data_type": "TYPE_INT64", "dims": [16], "random_data": True},
        "S": {"data_type": "TYPE_STRING", "dims": [2], "zero_data": True},
    }
    (sample,) = build_samples(_config(spec), tmp_path)
    r, s = sample.inputs
    assert r[3].dtype == np.int64 and r[3].shape == (16,)
    assert s[1] == "BYTES" and list(s[3]) == [b"", b""]


def test_input_data_file_and_its_size(tmp_path):
    (tmp_path / "warmup").mkdir()
    (tmp_path / "warmup" / "x").write_bytes(np.arange(4, dtype="<i4").tobytes())
    spec = {"X": {"data_type": "TYPE_INT32", "dims": [4], "input_data_file": "x"}}
    (sample,) = build_samples(_config(spec), tmp_path)
    assert sample.inputs[0][3].tolist() == [0, 1, 2, 3]
    spec["X"]["dims"] = [5]
    with pytest.raises(InvalidArgument, match="byte size mismatch"):
        build_samples(_config(spec), tmp_path)


@pytest.mark.parametrize("path", ["../config.pbtxt", "/etc/hostname", "sub/../../x"])
def test_input_data_files_outside_the_warmup_folder(tmp_path, path):
    (tmp_path / "warmup").mkdir()
    spec = {"X": {"data_type": "TYPE_INT32", "dims": [1], "input_data_file": path}}
    with pytest.raises(InvalidArgument, match="must stay within the model's 'warmup' folder"):
        build_samples(_config(spec), tmp_path)


def test_variable_dims_are_refused(tmp_path):
    spec = {"X": {"data_type": "TYPE_INT32", "dims": [-1], "zero_data": True}}
    with pytest.raises(InvalidArgument, match="must have fixed dims"):
        build_samples(_config(spec), tmp_path)
