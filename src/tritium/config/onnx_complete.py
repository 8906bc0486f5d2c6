"""Auto-complete and check a configuration against an ONNX model's graph, as Triton's
onnxruntime backend does.

Given the graph's inputs and outputs (read by the backend, which owns onnxruntime), fill
what the configuration leaves out and refuse what contradicts the graph:

- backend fields: ``backend: "onnxruntime"``, ``platform: "onnxruntime_onnx"``;
- ``max_batch_size``: a graph whose every input and output has a variable first dimension
  can batch, so 0 becomes the backend's default (4, or
  ``--backend-config=onnxruntime,default-max-batch-size=N``), and a dynamic batcher is
  added when that is above 1; a non-zero ``max_batch_size`` on a graph that cannot batch
  fails;
- inputs (outputs) absent from the configuration all come from the graph: name, type and
  dims without the batch dimension; a scalar per item becomes ``dims: [1]`` with an empty
  ``reshape``;
- every configured tensor must exist in the graph with the same type and compatible dims;
- the tensors the sequence batcher supplies (``control_input``, the implicit ``state``
  inputs) and takes (the ``state`` outputs) are the graph's too but not the
  configuration's ``input``/``output``: auto-complete leaves them out, and they must exist
  in the graph with the type (and, for states, the dims) the sequence batching gives.

Auto-complete can be turned off (``--disable-auto-complete-config``); the checks cannot.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from tritonclient.grpc.model_config_pb2 import DataType, ModelConfig, ModelInput, ModelOutput

from tritium.config.errors import ConfigError
from tritium.config.sequence_checks import control_type

ONNXRUNTIME_BACKEND = "onnxruntime"
ONNXRUNTIME_PLATFORM = "onnxruntime_onnx"
ONNX_MODEL_FILENAME = "model.onnx"
#: Triton's onnxruntime backend's ``default-max-batch-size``.
DEFAULT_MAX_BATCH_SIZE = 4


@dataclass(frozen=True, slots=True)
class GraphTensor:
    """One input or output of an ONNX graph.

    ``config_type`` is Triton's type (``"TYPE_FP32"``), None when Triton has none (then
    ``onnx_type`` names it); ``shape`` has -1 for every dimension the graph leaves free.
    ``optional``: an input the graph may go without (an overridable initializer or an
    ``optional`` type)."""

    name: str
    config_type: str | None
    shape: tuple[int, ...]
    onnx_type: str = ""
    optional: bool = False


def complete_onnx_config(
    config: ModelConfig,
    inputs: Sequence[GraphTensor],
    outputs: Sequence[GraphTensor],
    *,
    auto_complete: bool = True,
    default_max_batch_size: int = DEFAULT_MAX_BATCH_SIZE,
    backend: str = ONNXRUNTIME_BACKEND,
    platform: str = ONNXRUNTIME_PLATFORM,
    graph_kind: str = "ONNX",
) -> ModelConfig:
    """A copy of ``config`` completed from and checked against the graph's ``inputs`` and
    ``outputs``. Raises ConfigError (phase "load") naming the first tensor at fault.
    ``backend``/``platform`` fill the configuration's when empty (another graph backend,
    openvino, uses the same rules; ``graph_kind`` names its models in messages)."""
    out = ModelConfig()
    out.CopyFrom(config)
    if not out.backend:
        out.backend = backend
    if not out.platform and platform:
        out.platform = platform
    name = out.name
    required = [t for t in inputs if not t.optional]
    state_inputs, state_outputs = _sequence_tensors(out)
    supplied = {io.name for io in state_inputs}
    supplied.update(c.name for c in out.sequence_batching.control_input)
    taken = {io.name for io in state_outputs}
    if auto_complete:
        _complete_max_batch_size(out, [*required, *outputs], default_max_batch_size)
        if not out.input:
            for tensor in required:
                if tensor.name not in supplied:
                    _fill(out.input.add(), tensor, out.max_batch_size, name, "input", graph_kind)
        if not out.output:
            for tensor in outputs:
                if tensor.name not in taken:
                    _fill(out.output.add(), tensor, out.max_batch_size, name, "output", graph_kind)
    elif out.max_batch_size > 0 and not _can_batch([*required, *outputs]):
        raise ConfigError(_no_batching(name), phase="load")

    by_name = {t.name: t for t in inputs}
    for io in out.input:
        graph = by_name.get(io.name)
        if graph is None:
            allowed = ", ".join(t.name for t in inputs)
            raise ConfigError(
                f"unexpected inference input '{io.name}' for model '{name}', "
                f"allowed inputs are: {allowed}",
                phase="load",
            )
        _check(io, graph, out.max_batch_size, name, "input", graph_kind)
    _check_sequence_tensors(out, state_inputs, state_outputs, inputs, outputs, graph_kind)
    configured = {io.name for io in out.input} | supplied
    for tensor in required:
        if tensor.name not in configured:
            raise ConfigError(
                f"input '{tensor.name}' of the {graph_kind} model of '{name}' is missing from the "
                "model configuration (the model cannot run without it)",
                phase="load",
            )
    out_by_name = {t.name: t for t in outputs}
    for io in out.output:
        graph = out_by_name.get(io.name)
        if graph is None:
            allowed = ", ".join(t.name for t in outputs)
            raise ConfigError(
                f"unexpected inference output '{io.name}' for model '{name}', "
                f"allowed outputs are: {allowed}",
                phase="load",
            )
        _check(io, graph, out.max_batch_size, name, "output", graph_kind)
    return out


def _sequence_tensors(config: ModelConfig) -> tuple[list[ModelInput], list[ModelOutput]]:
    """The implicit state tensors of ``config``'s sequence batching: the inputs the batcher
    feeds and the outputs it keeps, as tensors to check like configured ones."""
    if not config.HasField("sequence_batching"):
        return [], []
    states = config.sequence_batching.state
    return (
        [ModelInput(name=s.input_name, data_type=s.data_type, dims=s.dims) for s in states],
        [ModelOutput(name=s.output_name, data_type=s.data_type, dims=s.dims) for s in states],
    )


def _check_sequence_tensors(
    config: ModelConfig,
    state_inputs: list[ModelInput],
    state_outputs: list[ModelOutput],
    inputs: Sequence[GraphTensor],
    outputs: Sequence[GraphTensor],
    graph_kind: str,
) -> None:
    """The sequence batcher's tensors must be the graph's, of the types it gives them."""
    name = config.name
    batch = config.max_batch_size
    for control_input in config.sequence_batching.control_input:
        graph = _in_graph(
            control_input.name, inputs, "sequence batching input", "input", name, graph_kind
        )
        for control in control_input.control:
            expected = control_type(control)
            if expected and graph.config_type != expected:
                raise ConfigError(
                    f"control input '{control_input.name}' of model '{name}' is "
                    f"{expected} in the sequence batching but "
                    f"{graph.config_type or graph.onnx_type} in its {graph_kind} model",
                    phase="load",
                )
    for state in state_inputs:
        graph = _in_graph(state.name, inputs, "sequence batching input", "input", name, graph_kind)
        _check(state, graph, batch, name, "input", graph_kind)
    for state_output in state_outputs:
        graph = _in_graph(state_output.name, outputs, "state output", "output", name, graph_kind)
        _check(state_output, graph, batch, name, "output", graph_kind)


def _in_graph(
    tensor_name: str,
    tensors: Sequence[GraphTensor],
    role: str,
    what: str,
    model: str,
    graph_kind: str,
) -> GraphTensor:
    """The graph's ``what`` (input or output) named ``tensor_name``; a ConfigError naming
    it by its ``role`` when the graph has none."""
    for tensor in tensors:
        if tensor.name == tensor_name:
            return tensor
    raise ConfigError(
        f"{role} '{tensor_name}' of model '{model}' is not an {what} of its {graph_kind} "
        f"model, whose {what}s are: " + ", ".join(t.name for t in tensors),
        phase="load",
    )


def _can_batch(tensors: Sequence[GraphTensor]) -> bool:
    return all(len(t.shape) > 0 and t.shape[0] == -1 for t in tensors)


def _no_batching(name: str) -> str:
    # Triton's onnxruntime backend's words.
    return (
        f"autofill failed for model '{name}': model does not support batching while "
        "non-zero max_batch_size is specified"
    )


def _complete_max_batch_size(
    config: ModelConfig, tensors: Sequence[GraphTensor], default_max_batch_size: int
) -> None:
    if not _can_batch(tensors):
        if config.max_batch_size != 0:
            raise ConfigError(_no_batching(config.name), phase="load")
        return
    if config.max_batch_size == 0:
        config.max_batch_size = max(default_max_batch_size, 0)
        if (
            config.max_batch_size > 1
            and not config.HasField("dynamic_batching")
            and not config.HasField("sequence_batching")
        ):
            config.dynamic_batching.SetInParent()


def _fill(
    io: ModelInput | ModelOutput,
    tensor: GraphTensor,
    max_batch_size: int,
    model: str,
    what: str,
    graph_kind: str = "ONNX",
) -> None:
    if tensor.config_type is None:
        raise ConfigError(_unservable(tensor, model, what, graph_kind), phase="load")
    io.name = tensor.name
    io.data_type = DataType.Value(tensor.config_type)
    dims = tensor.shape[1:] if max_batch_size > 0 else tensor.shape
    if dims:
        io.dims.extend(dims)
    else:
        # Triton's tensors have at least one dimension: a scalar (per item) is shown as
        # [1] and reshaped to nothing for the model.
        io.dims.append(1)
        io.reshape.SetInParent()


def _unservable(tensor: GraphTensor, model: str, what: str, graph_kind: str) -> str:
    return (
        f"{what} '{tensor.name}' of the {graph_kind} model of '{model}' has type "
        f"'{tensor.onnx_type or 'unknown'}', which has no Triton data type"
    )


def _check(
    io: ModelInput | ModelOutput,
    tensor: GraphTensor,
    max_batch_size: int,
    model: str,
    what: str,
    graph_kind: str = "ONNX",
) -> None:
    if tensor.config_type is None:
        raise ConfigError(_unservable(tensor, model, what, graph_kind), phase="load")
    configured = DataType.Name(io.data_type)
    if configured != tensor.config_type:
        raise ConfigError(
            f"unexpected datatype {configured} for inference {what} '{io.name}' of model "
            f"'{model}', expecting {tensor.config_type}",
            phase="load",
        )
    dims = list(io.reshape.shape) if io.HasField("reshape") else list(io.dims)
    graph = list(tensor.shape)
    if max_batch_size > 0:
        if not graph or graph[0] != -1:
            raise ConfigError(
                f"model '{model}', tensor '{io.name}': the model's {what} has no variable "
                f"first (batch) dimension (shape {_text(graph)}) but max_batch_size is "
                f"{max_batch_size}",
                phase="load",
            )
        graph = graph[1:]
    if len(dims) != len(graph) or any(g != -1 and g != d for g, d in zip(graph, dims)):
        batch = " after the batch dimension" if max_batch_size > 0 else ""
        source = "reshape" if io.HasField("reshape") else "dims"
        raise ConfigError(
            f"model '{model}', tensor '{io.name}': the model expects shape {_text(graph)}"
            f"{batch} but the model configuration's {source} is {_text(dims)}",
            phase="load",
        )


def _text(shape: Sequence[int]) -> str:
    return "[" + ",".join(str(d) for d in shape) + "]"
