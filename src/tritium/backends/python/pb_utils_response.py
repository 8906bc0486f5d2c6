"""``InferenceResponse`` as model code sees it, and the checks it shares with requests
(parameter rules, tensor lists); apart from the request so the BLS module can build
responses without importing the request type."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from tritium.backends.python.pb_utils_errors import TritonError, TritonModelException
from tritium.backends.python.pb_utils_tensor import Tensor


def parameters_to_json(parameters: Any, compact: bool = False) -> str:
    """Validate a parameters dict as Triton does and return it as a JSON string.

    Keys must be ``str`` and values ``bool``/``int``/``str``; ``None`` means no parameters.
    Model-supplied parameters are written the way Python's ``json.dumps`` writes them (as
    Triton does); ``compact`` gives the separator-free form Triton uses for parameters that
    arrive with a request.
    """
    if parameters is None:
        return "{}"
    if not isinstance(parameters, dict):
        raise TritonModelException(f"Expect dict, got {type(parameters)}")
    for key, value in parameters.items():
        if not isinstance(key, str):
            raise TritonModelException(
                f"Expect parameters keys to have type str, found type {type(key)}"
            )
        if not isinstance(value, (bool, int, str)):
            raise TritonModelException(
                f"Expect parameters values to have type bool/int/str, found type {type(value)}"
            )
    if compact:
        return json.dumps(parameters, separators=(",", ":"))
    return json.dumps(parameters)


def _check_tensors(tensors: Iterable[Any], what: str) -> list[Tensor]:
    out = list(tensors)
    for tensor in out:
        if not isinstance(tensor, Tensor):
            raise TypeError(f"{what} must be pb_utils.Tensor objects, got {type(tensor)}")
    return out


class InferenceResponse:
    """``InferenceResponse(output_tensors=None, error=None, parameters=None)``.

    ``parameters`` values must be ``bool``/``int``/``str`` (Triton's rule); the validated
    dict is kept in ``_parameters_dict`` for the worker, ``parameters()`` gives JSON.
    """

    __slots__ = ("_output_tensors", "_error", "_parameters_dict", "_parameters_json")

    def __init__(
        self,
        output_tensors: Iterable[Tensor] | None = None,
        error: TritonError | None = None,
        parameters: dict[str, bool | int | str] | None = None,
    ) -> None:
        tensors = (
            _check_tensors(output_tensors, "output_tensors") if output_tensors is not None else []
        )
        if error is not None and not isinstance(error, TritonError):
            raise TypeError(f"error must be a pb_utils.TritonError or None, got {type(error)}")
        self._parameters_json = parameters_to_json(parameters)
        self._parameters_dict: dict[str, bool | int | str] = dict(parameters) if parameters else {}
        self._output_tensors = tensors
        self._error = error

    def output_tensors(self) -> list[Tensor]:
        return list(self._output_tensors)

    def has_error(self) -> bool:
        return self._error is not None

    def error(self) -> TritonError | None:
        return self._error

    def parameters(self) -> str:
        """The response's parameters as a JSON object string."""
        return self._parameters_json

    def __repr__(self) -> str:
        names = [t.name() for t in self._output_tensors]
        return f"InferenceResponse(output_tensors={names}, error={self._error!r})"
