"""Model-config helpers of ``triton_python_backend_utils``: lookups, type maps, BYTES codec
and the ``ModelConfig`` object that ``auto_complete_config`` edits.

Behaviour and error texts follow Triton's Python backend, so a model's
``auto_complete_config`` fails (or succeeds) here exactly as it would under Triton. The
config is the JSON form of ``ModelConfig`` with snake_case keys (``max_batch_size``,
``data_type``...); unlike Triton we tolerate keys a sparse JSON omits (``input``,
``output``, ``max_batch_size``, ``dims``) by treating them as their proto defaults.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import numpy as np

from tritium.core.datatypes import deserialize_bytes, serialize_bytes

TRITON_STRING_TO_NUMPY: dict[str, Any] = {
    "TYPE_BOOL": bool,
    "TYPE_UINT8": np.uint8,
    "TYPE_UINT16": np.uint16,
    "TYPE_UINT32": np.uint32,
    "TYPE_UINT64": np.uint64,
    "TYPE_INT8": np.int8,
    "TYPE_INT16": np.int16,
    "TYPE_INT32": np.int32,
    "TYPE_INT64": np.int64,
    "TYPE_FP16": np.float16,
    "TYPE_FP32": np.float32,
    "TYPE_FP64": np.float64,
    "TYPE_STRING": np.object_,
}

# TRITONSERVER_TYPE_* integer -> numpy type, as triton_to_numpy_type returns it.
_NUMPY_BY_TRITON: dict[int, Any] = {
    1: np.bool_,
    2: np.uint8,
    3: np.uint16,
    4: np.uint32,
    5: np.uint64,
    6: np.int8,
    7: np.int16,
    8: np.int32,
    9: np.int64,
    10: np.float16,
    11: np.float32,
    12: np.float64,
    13: np.object_,
}
_TRITON_BY_DTYPE: dict[np.dtype, int] = {np.dtype(t): code for code, t in _NUMPY_BY_TRITON.items()}


def triton_string_to_numpy(triton_type_string: str) -> Any:
    """ "TYPE_FP32" -> ``np.float32``; "TYPE_STRING" -> ``np.object_``; KeyError if unknown."""
    return TRITON_STRING_TO_NUMPY[triton_type_string]


def triton_to_numpy_type(data_type: int) -> Any:
    """``TRITONSERVER_TYPE_*`` integer -> numpy type; None for types numpy cannot hold."""
    return _NUMPY_BY_TRITON.get(data_type)


def numpy_to_triton_type(data_type: Any) -> int | None:
    """numpy dtype (or type) -> ``TRITONSERVER_TYPE_*`` integer; None if Triton lacks it."""
    try:
        dtype = np.dtype(data_type)
    except TypeError:
        return None
    if dtype.kind == "S":
        return 13
    return _TRITON_BY_DTYPE.get(dtype)


def serialize_byte_tensor(input_tensor: np.ndarray) -> bytes | tuple[()] | None:
    """Triton's BYTES serialization of an object / ``np.bytes_`` array, in C order.

    Returns the serialized ``bytes`` (each element a 4-byte little-endian length then its
    bytes; ``str`` elements UTF-8 encoded, other objects via ``str()``), ``()`` for an
    empty array and None for arrays of any other dtype — Triton's exact return values.
    """
    if input_tensor.size == 0:
        return ()
    if input_tensor.dtype == np.object_ or input_tensor.dtype.kind == "S":
        return serialize_bytes(input_tensor)
    return None


def deserialize_bytes_tensor(encoded_tensor: bytes | memoryview | np.ndarray) -> np.ndarray:
    """Inverse of :func:`serialize_byte_tensor`: a flat object array of ``bytes``."""
    return deserialize_bytes(encoded_tensor)  # type: ignore[arg-type]  # any buffer works


def get_input_config_by_name(model_config: dict[str, Any], name: str) -> dict[str, Any] | None:
    """The ``input`` entry of ``model_config`` named ``name``, or None."""
    for properties in model_config.get("input", ()):
        if properties["name"] == name:
            return properties
    return None


def get_output_config_by_name(model_config: dict[str, Any], name: str) -> dict[str, Any] | None:
    """The ``output`` entry of ``model_config`` named ``name``, or None."""
    for properties in model_config.get("output", ()):
        if properties["name"] == name:
            return properties
    return None


def using_decoupled_model_transaction_policy(model_config: dict[str, Any]) -> bool:
    """True when ``model_transaction_policy { decoupled: true }`` is configured."""
    return bool(model_config.get("model_transaction_policy", {}).get("decoupled", False))


class ModelConfig:
    """The configuration handed to ``auto_complete_config``, editable within Triton's rules.

    Built from the config's JSON (a ``str``, as Triton passes it) or an already parsed
    dict (copied). Only ``max_batch_size``, the scheduler choice, inputs, outputs and the
    transaction policy can be changed; every mutator raises ``ValueError`` with Triton's
    text when the change contradicts what ``config.pbtxt`` already says.
    """

    def __init__(self, model_config: str | bytes | dict[str, Any]) -> None:
        if isinstance(model_config, dict):
            self._model_config = copy.deepcopy(model_config)
        else:
            self._model_config = json.loads(model_config)

    def as_dict(self) -> dict[str, Any]:
        return self._model_config

    @property
    def _name(self) -> str:
        return str(self._model_config.get("name", ""))

    def set_max_batch_size(self, max_batch_size: int) -> None:
        current = self._model_config.get("max_batch_size", 0)
        if current > max_batch_size:
            raise ValueError(
                f"configuration specified max_batch_size {current}, but in "
                f"auto-complete-config function for model '{self._name}' specified "
                f"max_batch_size {max_batch_size}"
            )
        self._model_config["max_batch_size"] = max_batch_size

    def set_dynamic_batching(self) -> None:
        for scheduler in ("sequence_batching", "ensemble_scheduling"):
            if scheduler in self._model_config:
                raise ValueError(
                    f"Configuration specified scheduling_choice as '{scheduler}', but "
                    f"auto-complete-config function for model '{self._name}' tries to set "
                    "scheduling_choice as 'dynamic_batching'"
                )
        self._model_config.setdefault("dynamic_batching", {})

    def add_input(self, input: dict[str, Any]) -> None:  # noqa: A002 - Triton's argument name
        self._add_tensor("input", input, ("name", "data_type", "dims", "optional"))

    def add_output(self, output: dict[str, Any]) -> None:
        self._add_tensor("output", output, ("name", "data_type", "dims"))

    def _add_tensor(self, kind: str, tensor: dict[str, Any], valid: tuple[str, ...]) -> None:
        for prop in tensor:
            if prop not in valid:
                allowed = (
                    "'name', 'data_type', 'dims' and 'optional'"
                    if kind == "input"
                    else ("'name', 'data_type' and 'dims'")
                )
                raise ValueError(
                    f"{kind} '{tensor.get('name', '')}' in auto-complete-config function for "
                    f"model '{self._name}' contains property other than {allowed}."
                )
        if "name" not in tensor:
            raise ValueError(
                f"{kind} in auto-complete-config function for model '{self._name}' is "
                "missing 'name' property."
            )
        for required in ("data_type", "dims"):
            if required not in tensor:
                raise ValueError(
                    f"{kind} '{tensor['name']}' in auto-complete-config function for model "
                    f"'{self._name}' is missing '{required}' property."
                )
        entries = self._model_config.setdefault(kind, [])
        for current in entries:
            if current.get("name") != tensor["name"]:
                continue
            current_type = current.get("data_type", "TYPE_INVALID")
            current_dims = current.get("dims") or []
            if current_type != "TYPE_INVALID" and current_type != tensor["data_type"]:
                raise ValueError(
                    f"unable to load model '{self._name}', configuration expects datatype "
                    f"{current_type} for {kind} '{tensor['name']}', model provides "
                    f"{tensor['data_type']}"
                )
            if current_dims and list(current_dims) != list(tensor["dims"]):
                raise ValueError(
                    f"model '{self._name}', tensor '{tensor['name']}': the model expects dims "
                    f"{tensor['dims']} but the model configuration specifies dims "
                    f"{current_dims}"
                )
            if (
                kind == "input"
                and "optional" in current
                and "optional" in tensor
                and current["optional"] != tensor["optional"]
            ):
                raise ValueError(
                    f"model '{self._name}', tensor '{tensor['name']}': the model expects "
                    f"optional {tensor['optional']} but the model configuration specifies "
                    f"optional {current['optional']}"
                )
            current["data_type"] = tensor["data_type"]
            current["dims"] = tensor["dims"]
            if "optional" in tensor:
                current["optional"] = tensor["optional"]
            return
        entries.append(tensor)

    def set_model_transaction_policy(self, transaction_policy_dict: dict[str, Any]) -> None:
        for prop in transaction_policy_dict:
            if prop != "decoupled":
                raise ValueError(
                    "model transaction property in auto-complete-config function for model "
                    f"'{self._name}' contains property other than 'decoupled'."
                )
        policy = self._model_config.setdefault("model_transaction_policy", {})
        if "decoupled" in transaction_policy_dict:
            wanted = transaction_policy_dict["decoupled"]
            if "decoupled" in policy and policy["decoupled"] != wanted:
                raise ValueError(
                    "trying to change decoupled property in auto-complete-config for model "
                    f"'{self._name}', which is already set to '{policy['decoupled']}'."
                )
            policy["decoupled"] = wanted
