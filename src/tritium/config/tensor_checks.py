"""Checks on a configuration's inputs, outputs, batch inputs and batch outputs.

Messages are Triton's (ValidateIOShape, ValidateModelInput/Output, ValidateBatchIO), so a
model that fails here reads the same as it would under Triton. Triton reports these when
it loads a version; the caller appends " for <model>" as Triton does.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from tritonclient.grpc.model_config_pb2 import (
    BatchInput,
    BatchOutput,
    DataType,
    ModelConfig,
    ModelInput,
    ModelOutput,
)

WILDCARD_DIM = -1
_TENSORRT_PLATFORM = "tensorrt_plan"
_KNOWN_DATA_TYPES = frozenset(DataType.values()) - {DataType.TYPE_INVALID}


def tensor_problem(config: ModelConfig) -> str | None:
    """The first problem with the model's tensors, in Triton's words, or None."""
    platform = config.platform
    max_batch_size = config.max_batch_size
    for tensor in config.input:
        problem = _io_shape_problem(tensor, max_batch_size, "model input ")
        if problem is None:
            problem = _input_problem(tensor, platform)
        if problem is not None:
            return problem
    for tensor in config.output:
        problem = _io_shape_problem(tensor, max_batch_size, "model output ")
        if problem is None:
            problem = _output_problem(tensor, platform)
        if problem is not None:
            return problem
    return (
        _batch_io_problem(config)
        or _duplicate_problem("model input", (t.name for t in config.input))
        or _duplicate_problem("model output", (t.name for t in config.output))
    )


def _io_shape_problem(io: ModelInput | ModelOutput, max_batch_size: int, prefix: str) -> str | None:
    if not io.name:
        return prefix + "must specify 'name'"
    prefix = f"{prefix}'{io.name}' "
    if io.data_type == DataType.TYPE_INVALID:
        return prefix + "must specify 'data_type'"
    if io.data_type not in _KNOWN_DATA_TYPES:
        return prefix + f"has unknown data type {io.data_type}"
    if not io.dims:
        return prefix + "must specify 'dims'"
    has_reshape = io.HasField("reshape")
    if has_reshape and not io.reshape.shape and max_batch_size == 0:
        return prefix + (
            "cannot have empty reshape for non-batching model as scalar tensors are not supported"
        )
    if any(d < 1 and d != WILDCARD_DIM for d in io.dims):
        return prefix + (
            f"dimension must be integer >= 1, or {WILDCARD_DIM} to indicate a variable-size dimension"
        )
    if not has_reshape:
        return None
    if any(d < 1 and d != WILDCARD_DIM for d in io.reshape.shape):
        return prefix + (
            f"reshape dimensions must be integer >= 1, or {WILDCARD_DIM} to indicate a "
            "variable-size dimension"
        )
    dims_size = _element_count(io.dims)
    reshape_size = _element_count(io.reshape.shape)
    # An empty reshape (a scalar per batch item) matches dims with exactly one element.
    if dims_size != reshape_size and (reshape_size != 0 or dims_size != 1):
        return prefix + "has different size for dims and reshape"
    if dims_size == WILDCARD_DIM:
        # Both have variable dimensions: the runs of fixed dimensions between wildcards
        # must hold the same element counts, e.g. [2, 4, -1, 6] -> [8, -1, 1, 6].
        dims_runs = _runs_between_wildcards(io.dims)
        reshape_runs = _runs_between_wildcards(io.reshape.shape)
        if len(dims_runs) != len(reshape_runs):
            return prefix + (
                "has different number of variable-size dimensions for dims and reshape"
            )
        if dims_runs != reshape_runs:
            return prefix + "has different size for dims and reshape"
    return None


def _input_problem(io: ModelInput, platform: str) -> str | None:
    if io.format in (ModelInput.FORMAT_NHWC, ModelInput.FORMAT_NCHW) and len(io.dims) != 3:
        return "model input NHWC/NCHW require 3 dims"
    if platform != _TENSORRT_PLATFORM and io.is_shape_tensor:
        return "shape tensors are only supported for TensorRT platform"
    return _non_linear_problem(io, platform, "input")


def _output_problem(io: ModelOutput, platform: str) -> str | None:
    if platform != _TENSORRT_PLATFORM and io.is_shape_tensor:
        return "shape tensors are only supported for TensorRT platform"
    return _non_linear_problem(io, platform, "output")


def _non_linear_problem(io: ModelInput | ModelOutput, platform: str, direction: str) -> str | None:
    if not io.is_non_linear_format_io:
        return None
    if platform != _TENSORRT_PLATFORM:
        return "Non-linear IO format is only supported for the TensorRT platform"
    if len(io.dims) != 3:
        return f"Non-linear IO format {direction} requires 3 dims"
    return None


_ONE_SOURCE_BATCH_INPUTS = frozenset(
    {
        BatchInput.BATCH_ELEMENT_COUNT,
        BatchInput.BATCH_ACCUMULATED_ELEMENT_COUNT,
        BatchInput.BATCH_ACCUMULATED_ELEMENT_COUNT_WITH_ZERO,
        BatchInput.BATCH_MAX_ELEMENT_COUNT_AS_SHAPE,
        BatchInput.BATCH_ITEM_SHAPE,
        BatchInput.BATCH_ITEM_SHAPE_FLATTEN,
    }
)


def _batch_io_problem(config: ModelConfig) -> str | None:
    input_names = {t.name for t in config.input}
    output_names = {t.name for t in config.output}
    for batch_input in config.batch_input:
        kind = _enum_name(BatchInput.Kind, batch_input.kind)
        if batch_input.kind not in _ONE_SOURCE_BATCH_INPUTS:
            return f"unknown batch input kind '{kind}'"
        if len(batch_input.source_input) != 1:
            return (
                f"batch input kind '{kind}' expects 1 source input, "
                f"got {len(batch_input.source_input)}"
            )
        if batch_input.data_type not in (DataType.TYPE_INT32, DataType.TYPE_FP32):
            return "batch input data type must be TYPE_INT32 or TYPE_FP32"
        for source in batch_input.source_input:
            if source not in input_names:
                return f"unknown source input name '{source}'"
    for batch_output in config.batch_output:
        kind = _enum_name(BatchOutput.Kind, batch_output.kind)
        if batch_output.kind != BatchOutput.BATCH_SCATTER_WITH_INPUT_SHAPE:
            return f"unknown batch output kind '{kind}'"
        if len(batch_output.source_input) != 1:
            return (
                f"batch output kind '{kind}' expects 1 source input, "
                f"got {len(batch_output.source_input)}"
            )
        for source in batch_output.source_input:
            if source not in input_names:
                return f"unknown source input name '{source}'"
        seen: set[str] = set()
        for target in batch_output.target_name:
            if target not in output_names:
                return f"unknown target output name '{target}'"
            if target in seen:
                return f"target output name '{target}' can only be specified once"
            seen.add(target)
    return None


def _duplicate_problem(what: str, names: Iterable[str]) -> str | None:
    # Triton loads such a model and silently uses one of the two entries; refusing it
    # turns a certain mistake into a clear message.
    seen: set[str] = set()
    for name in names:
        if name in seen:
            return f"{what} '{name}' is specified more than once"
        seen.add(name)
    return None


def _element_count(dims: Sequence[int]) -> int:
    """Triton's GetElementCount: -1 with any wildcard, 0 for no dims, else the product."""
    count = 0
    for index, dim in enumerate(dims):
        if dim == WILDCARD_DIM:
            return WILDCARD_DIM
        count = dim if index == 0 else count * dim
    return count


def _runs_between_wildcards(dims: Sequence[int]) -> list[int]:
    runs: list[int] = []
    current = 1
    for dim in dims:
        if dim == WILDCARD_DIM:
            runs.append(current)
            current = 1
        else:
            current *= dim
    runs.append(current)
    return runs


def _enum_name(enum_type: object, value: int) -> str:
    try:
        return enum_type.Name(value)  # type: ignore[attr-defined]
    except ValueError:
        return str(value)
