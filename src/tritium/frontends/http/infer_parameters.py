"""The request-level members of a v2 infer request's JSON: ``parameters`` (sequence
controls, priority, timeout, ``binary_data_output``, custom parameters) and the requested
``outputs`` with their preferences."""

from __future__ import annotations

from tritium.core.errors import InvalidArgument
from tritium.core.types import InferRequest, RequestedOutput
from tritium.frontends.http.infer_fields import (
    NOT_ARRAY,
    NOT_BOOL,
    NOT_OBJECT,
    NOT_STR,
    NOT_UINT,
    get_str,
    is_uint,
    not_member,
    wrong_kind,
)
from tritium.frontends.http.output_prefs import OutputPref, OutputPrefs

FLAG_SEQUENCE_START = 1
FLAG_SEQUENCE_END = 2


def apply_parameters(params: object, request: InferRequest, prefs: OutputPrefs) -> None:
    if type(params) is not dict:
        raise InvalidArgument(
            "failed to get request params.: attempt to get members for non-object"
        )
    kept: dict = {}
    flags = 0
    for key, value in params.items():
        if key == "sequence_id":
            if is_uint(value) or type(value) is str:
                request.correlation_id = value
            else:
                raise wrong_kind("sequence_id", NOT_STR)
        elif key == "sequence_start" or key == "sequence_end":
            if type(value) is not bool:
                raise wrong_kind(key, NOT_BOOL)
            if value:
                flags |= FLAG_SEQUENCE_START if key == "sequence_start" else FLAG_SEQUENCE_END
        elif key == "priority" or key == "timeout":
            if not is_uint(value):
                raise wrong_kind(key, NOT_UINT)
            if key == "priority":
                request.priority = value
            else:
                request.timeout_us = value
        elif key == "binary_data_output":
            if type(value) is not bool:
                raise wrong_kind(key, NOT_BOOL)
            prefs.default_binary = value
        elif key.startswith("triton_"):
            raise InvalidArgument(
                "parameter keys starting with 'triton_' are reserved for Triton usage and "
                "should not be specified."
            )
        elif type(value) in (str, int, bool, float):
            kept[key] = value
        else:
            raise InvalidArgument(
                f"parameter '{key}' has invalid type. It should be either 'int', 'bool', or "
                "'string'."
            )
    request.flags = flags
    request.parameters = kept


def apply_outputs(outputs: object, request: InferRequest, prefs: OutputPrefs) -> None:
    if type(outputs) is not list:
        raise wrong_kind("outputs", NOT_ARRAY)
    requested: list[RequestedOutput] = []
    for out in outputs:
        if type(out) is not dict:
            raise not_member("name")
        params = out.get("parameters", {})
        if type(params) is not dict:
            raise wrong_kind("parameters", NOT_OBJECT)
        shm = "shared_memory_region" in params
        binary = params.get("binary_data", False)
        if type(binary) is not bool:
            raise wrong_kind("binary_data", NOT_BOOL)
        if shm and "classification" in params:
            raise InvalidArgument(
                "Output can't set both 'shared_memory_region' and 'classification'"
            )
        if shm and binary:
            raise InvalidArgument("Output can't set both 'shared_memory_region' and 'binary_data'")
        name = get_str(out, "name")
        classes = params.get("classification", 0)
        if not is_uint(classes):
            raise wrong_kind("classification", NOT_UINT, "Unable to set")
        # Triton silently keeps the first entry of a repeated output name; tritium passes
        # every entry on so the service rejects the repetition with a clear 400.
        if shm:
            request.shared_memory = True
        if name not in prefs.by_name:
            prefs.by_name[name] = OutputPref(binary, classes, shm)
            if classes:
                prefs.wants_classification = True
                if request.classification is None:
                    request.classification = {}
                request.classification[name] = classes
        requested.append(RequestedOutput(name, dict(params)))
    request.outputs = requested
