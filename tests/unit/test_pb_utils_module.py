"""The pb_utils module surface: names and constants as Triton's triton_python_backend_utils."""

from __future__ import annotations

import pytest

from tritium.backends.python import pb_utils
from tritium.backends.python.pb_utils import MetricFamily, TritonModelException

# What `dir(triton_python_backend_utils)` shows inside a Triton 2.51 model (minus modules).
TRITON_NAMES = [
    "InferenceRequest",
    "InferenceResponse",
    "Logger",
    "MetricFamily",
    "ModelConfig",
    "PreferredMemory",
    "TRITONSERVER_MEMORY_CPU",
    "TRITONSERVER_MEMORY_GPU",
    "TRITONSERVER_REQUEST_FLAG_SEQUENCE_END",
    "TRITONSERVER_REQUEST_FLAG_SEQUENCE_START",
    "TRITONSERVER_REQUEST_RELEASE_ALL",
    "TRITONSERVER_REQUEST_RELEASE_RESCHEDULE",
    "TRITONSERVER_RESPONSE_COMPLETE_FINAL",
    "TRITON_STRING_TO_NUMPY",
    "Tensor",
    "TritonError",
    "TritonModelException",
    "deserialize_bytes_tensor",
    "get_input_config_by_name",
    "get_input_tensor_by_name",
    "get_model_dir",
    "get_output_config_by_name",
    "get_output_tensor_by_name",
    "is_model_ready",
    "load_model",
    "numpy_to_triton_type",
    "serialize_byte_tensor",
    "triton_string_to_numpy",
    "triton_to_numpy_type",
    "unload_model",
    "using_decoupled_model_transaction_policy",
]


def test_every_triton_name_is_exported():
    missing = [
        name for name in TRITON_NAMES if name not in pb_utils.__all__ or not hasattr(pb_utils, name)
    ]
    assert missing == []


def test_star_import_gives_the_surface():
    namespace: dict = {}
    exec("from tritium.backends.python.pb_utils import *", namespace)
    assert set(TRITON_NAMES) <= set(namespace)


def test_constants_have_triton_values():
    assert pb_utils.TRITONSERVER_REQUEST_FLAG_SEQUENCE_START == 1
    assert pb_utils.TRITONSERVER_REQUEST_FLAG_SEQUENCE_END == 2
    assert pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL == 1
    assert pb_utils.TRITONSERVER_REQUEST_RELEASE_ALL == 1
    assert pb_utils.TRITONSERVER_REQUEST_RELEASE_RESCHEDULE == 2
    assert pb_utils.TRITONSERVER_MEMORY_GPU == 0
    assert pb_utils.TRITONSERVER_MEMORY_CPU == 1
    memory = pb_utils.PreferredMemory(pb_utils.TRITONSERVER_MEMORY_CPU)
    assert memory.preferred_device_id == 0


def test_get_model_dir_is_set_by_the_worker():
    saved = pb_utils.get_model_dir()
    try:
        pb_utils._set_model_dir("/repo/model/1")
        assert pb_utils.get_model_dir() == "/repo/model/1"
    finally:
        pb_utils._set_model_dir(saved)


@pytest.mark.parametrize(
    "call",
    [
        lambda: pb_utils.load_model("m"),
        lambda: pb_utils.unload_model("m"),
        lambda: pb_utils.is_model_ready("m"),
    ],
)
def test_model_management_outside_a_worker_raises(call):
    with pytest.raises(TritonModelException, match="no call channel to the server"):
        call()


# -- custom metrics (kept in-process) ---------------------------------------------------


def test_counter_and_gauge():
    counter = MetricFamily("requests", "count", MetricFamily.COUNTER).Metric({"model": "m"})
    counter.increment(2)
    counter.increment(3)
    assert counter.value() == 5
    with pytest.raises(TritonModelException):
        counter.increment(-1)
    with pytest.raises(TritonModelException):
        counter.set(1)
    gauge = MetricFamily("load", "gauge", MetricFamily.GAUGE).Metric()
    gauge.set(4)
    gauge.increment(-1.5)
    assert gauge.value() == 2.5


def test_same_labels_give_the_same_metric():
    family = MetricFamily("x", "d", MetricFamily.COUNTER)
    assert family.Metric({"a": "1", "b": "2"}) is family.Metric({"b": "2", "a": "1"})
    assert family.Metric({"a": "1"}) is not family.Metric({"a": "2"})


def test_histogram():
    family = MetricFamily("latency", "h", MetricFamily.HISTOGRAM)
    with pytest.raises(TritonModelException):
        family.Metric()
    metric = family.Metric(buckets=[1.0, 10.0])
    metric.observe(0.5)
    metric.observe(20)
    with pytest.raises(TritonModelException):
        metric.increment(1)
    with pytest.raises(TritonModelException):
        metric.value()
    with pytest.raises(TritonModelException):
        MetricFamily("g", "d", MetricFamily.GAUGE).Metric(buckets=[1.0])
