"""The ``triton_python_backend_utils`` module that ``model.py`` imports inside a worker.

The worker registers this module as ``sys.modules["triton_python_backend_utils"]`` so
``import triton_python_backend_utils as pb_utils`` works unchanged. It gathers the public
surface of Triton's Python backend (classes, helpers and ``TRITONSERVER_*`` constants with
Triton's values) from the ``pb_utils_*`` modules, and holds the per-process state the
worker sets up through the underscore functions :func:`_set_model_dir`,
:func:`_set_log_verbose` and :func:`_configure_logging`.

Supported: ordinary and decoupled models (``request.get_response_sender()``, see
``response_sender``), BLS (``InferenceRequest.exec``/``async_exec``) and model management
from model code. Request rescheduling raises
``TritonModelException`` saying so.
"""

from __future__ import annotations

from typing import TextIO

from tritium.backends.python.pb_utils_bls import (
    ResponseIterator,
    is_model_ready,
    load_model,
    unload_model,
)
from tritium.backends.python.pb_utils_config import (
    TRITON_STRING_TO_NUMPY,
    ModelConfig,
    deserialize_bytes_tensor,
    get_input_config_by_name,
    get_output_config_by_name,
    numpy_to_triton_type,
    serialize_byte_tensor,
    triton_string_to_numpy,
    triton_to_numpy_type,
    using_decoupled_model_transaction_policy,
)
from tritium.backends.python.pb_utils_errors import TritonError, TritonModelException
from tritium.backends.python.pb_utils_logger import Logger, LogLevel, configure_logging
from tritium.backends.python.pb_utils_messages import (
    TRITONSERVER_REQUEST_RELEASE_ALL,
    TRITONSERVER_REQUEST_RELEASE_RESCHEDULE,
    InferenceRequest,
    InferenceResponse,
    InferenceTrace,
    MemoryType,
    PreferredMemory,
)
from tritium.backends.python.pb_utils_metrics import Metric, MetricFamily, MetricKind
from tritium.backends.python.pb_utils_tensor import Tensor

TRITONSERVER_REQUEST_FLAG_SEQUENCE_START = 1
TRITONSERVER_REQUEST_FLAG_SEQUENCE_END = 2
TRITONSERVER_RESPONSE_COMPLETE_FINAL = 1
TRITONSERVER_MEMORY_GPU = MemoryType.TRITONSERVER_MEMORY_GPU
TRITONSERVER_MEMORY_CPU = MemoryType.TRITONSERVER_MEMORY_CPU

_model_dir = ""


def _set_model_dir(path: str) -> None:
    """Set what :func:`get_model_dir` returns (the model's version directory)."""
    global _model_dir
    _model_dir = str(path)


def _configure_logging(
    verbose: int | None = None, stream: TextIO | None = None, pid: int | None = None
) -> None:
    """Set ``Logger`` verbosity (``--log-verbose``), output stream and shown pid."""
    configure_logging(verbose=verbose, stream=stream, pid=pid)


def _set_log_verbose(level: int) -> None:
    """Set the ``--log-verbose`` level; VERBOSE lines print only when it is 1 or more."""
    configure_logging(verbose=level)


def get_model_dir() -> str:
    """The directory of the running model version, e.g. ``<repository>/<model>/1``."""
    return _model_dir


def get_input_tensor_by_name(inference_request: InferenceRequest, name: str) -> Tensor | None:
    """The request's input tensor called ``name``, or None."""
    for tensor in inference_request.inputs():
        if tensor.name() == name:
            return tensor
    return None


def get_output_tensor_by_name(inference_response: InferenceResponse, name: str) -> Tensor | None:
    """The response's output tensor called ``name``, or None."""
    for tensor in inference_response.output_tensors():
        if tensor.name() == name:
            return tensor
    return None


__all__ = [
    "TRITONSERVER_MEMORY_CPU",
    "TRITONSERVER_MEMORY_GPU",
    "TRITONSERVER_REQUEST_FLAG_SEQUENCE_END",
    "TRITONSERVER_REQUEST_FLAG_SEQUENCE_START",
    "TRITONSERVER_REQUEST_RELEASE_ALL",
    "TRITONSERVER_REQUEST_RELEASE_RESCHEDULE",
    "TRITONSERVER_RESPONSE_COMPLETE_FINAL",
    "TRITON_STRING_TO_NUMPY",
    "InferenceRequest",
    "InferenceResponse",
    "InferenceTrace",
    "LogLevel",
    "Logger",
    "MemoryType",
    "Metric",
    "MetricFamily",
    "MetricKind",
    "ModelConfig",
    "PreferredMemory",
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
    "ResponseIterator",
    "load_model",
    "numpy_to_triton_type",
    "serialize_byte_tensor",
    "triton_string_to_numpy",
    "triton_to_numpy_type",
    "unload_model",
    "using_decoupled_model_transaction_policy",
]
