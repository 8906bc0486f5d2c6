"""L0: data types, tensors, requests/responses and the error tree shared by every layer."""

from tritium.core.completion import Completion
from tritium.core.errors import (
    AlreadyExists,
    Cancelled,
    Code,
    InternalError,
    InvalidArgument,
    NotFound,
    TritiumError,
    Unavailable,
    UnknownError,
    Unsupported,
    error_from_code,
)
from tritium.core.types import (
    InferRequest,
    InferResponse,
    InputTensor,
    OutputTensor,
    Parameters,
    RequestedOutput,
    RequestSettings,
)

__all__ = [
    "AlreadyExists",
    "Cancelled",
    "Code",
    "Completion",
    "InferRequest",
    "InferResponse",
    "InputTensor",
    "InternalError",
    "InvalidArgument",
    "NotFound",
    "OutputTensor",
    "Parameters",
    "RequestedOutput",
    "RequestSettings",
    "TritiumError",
    "Unavailable",
    "UnknownError",
    "Unsupported",
    "error_from_code",
]
