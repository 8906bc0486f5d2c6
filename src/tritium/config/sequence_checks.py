"""Checks on ``sequence_batching``: control tensors and strategy settings, in Triton's words."""

from __future__ import annotations

from tritonclient.grpc.model_config_pb2 import DataType, ModelConfig, ModelSequenceBatching

_Control = ModelSequenceBatching.Control
_BOOLEAN_CONTROLS = (
    _Control.CONTROL_SEQUENCE_START,
    _Control.CONTROL_SEQUENCE_END,
    _Control.CONTROL_SEQUENCE_READY,
)
_CORRID_TYPES = frozenset(
    {
        DataType.TYPE_UINT64,
        DataType.TYPE_INT64,
        DataType.TYPE_UINT32,
        DataType.TYPE_INT32,
        DataType.TYPE_STRING,
    }
)
#: A boolean control's false/true field and the data type it gives the control tensor.
FALSE_TRUE_TYPES = (
    ("int32_false_true", "TYPE_INT32"),
    ("fp32_false_true", "TYPE_FP32"),
    ("bool_false_true", "TYPE_BOOL"),
)
_FALSE_TRUE_FIELDS = tuple(field for field, _ in FALSE_TRUE_TYPES)


def control_type(control: ModelSequenceBatching.Control) -> str:
    """The data type of the tensor ``control`` fills ("TYPE_FP32"): a correlation id's
    ``data_type``, a boolean control's false/true field's; "" when it has none."""
    if control.kind == _Control.CONTROL_SEQUENCE_CORRID:
        return DataType.Name(control.data_type)
    for field, config_type in FALSE_TRUE_TYPES:
        if len(getattr(control, field)):
            return config_type
    return ""


def sequence_problem(config: ModelConfig) -> str | None:
    """The first problem with ``config.sequence_batching``, or None (also when unset)."""
    if not config.HasField("sequence_batching"):
        return None
    name = config.name
    if config.response_cache.enable:
        return (
            f"Response Cache does not currently support model {name} with sequence "
            "batching scheduler. Please disable the response cache."
        )
    batcher = config.sequence_batching
    problem = _tensor_names_problem(batcher, name)
    if problem is not None:
        return problem
    for kind in _BOOLEAN_CONTROLS:
        problem = _boolean_control_problem(batcher, name, kind)
        if problem is not None:
            return problem
    problem = _corrid_control_problem(batcher, name)
    if problem is not None:
        return problem

    if batcher.HasField("oldest"):
        for size in batcher.oldest.preferred_batch_size:
            if size <= 0:
                return f"sequence batching preferred batch size must be positive for {name}"
            if size > config.max_batch_size:
                return (
                    f"sequence batching preferred batch size must be <= max batch size for {name}"
                )
    if batcher.HasField("direct"):
        utilization = batcher.direct.minimum_slot_utilization
        if utilization < 0.0 or utilization > 1.0:
            return (
                f"sequence batching minimum slot utilization must be in range (0.0, 1.0] for {name}"
            )
    return None


def _tensor_names_problem(batcher: ModelSequenceBatching, name: str) -> str | None:
    seen: set[str] = set()
    for control_input in batcher.control_input:
        if not control_input.name:
            return f"sequence batching control tensor must have a name for {name}"
        if control_input.name in seen:
            return (
                f"sequence batching control tensor '{control_input.name}' is specified for "
                f"multiple control kinds for {name}"
            )
        seen.add(control_input.name)
    return None


def _controls_of_kind(
    batcher: ModelSequenceBatching, kind: int
) -> list[ModelSequenceBatching.Control]:
    return [c for ci in batcher.control_input for c in ci.control if c.kind == kind]


def _boolean_control_problem(batcher: ModelSequenceBatching, name: str, kind: int) -> str | None:
    kind_name = _Control.Kind.Name(kind)
    controls = _controls_of_kind(batcher, kind)
    if len(controls) > 1:
        return f"sequence batching specifies multiple {kind_name} tensors for {name}"
    for control in controls:
        given = [f for f in _FALSE_TRUE_FIELDS if len(getattr(control, f)) != 0]
        if not given:
            return (
                "sequence batching must specify either 'int32_false_true', 'fp32_false_true' "
                f"or 'bool_false_true' for {kind_name} for {name}"
            )
        if len(given) > 1:
            return (
                "sequence batching specifies more than one from 'int32_false_true', "
                f"'fp32_false_true' and 'bool_false_true' for {kind_name} for {name}"
            )
        if len(getattr(control, given[0])) != 2:
            return (
                f"sequence batching control '{given[0]}' must have exactly 2 entries for "
                f"{kind_name} for {name}"
            )
    return None


def _corrid_control_problem(batcher: ModelSequenceBatching, name: str) -> str | None:
    kind = _Control.CONTROL_SEQUENCE_CORRID
    kind_name = _Control.Kind.Name(kind)
    controls = _controls_of_kind(batcher, kind)
    if len(controls) > 1:
        return f"sequence batching specifies multiple {kind_name} tensors for {name}"
    for control in controls:
        if any(len(getattr(control, f)) != 0 for f in _FALSE_TRUE_FIELDS):
            return (
                "sequence batching must not specify either 'int32_false_true', "
                f"'fp32_false_true' or 'bool_false_true' for {kind_name} for {name}"
            )
        if control.data_type not in _CORRID_TYPES:
            return (
                f"unexpected data type for control {kind_name} for {name}. Allowed data "
                "types are TYPE_UINT64, TYPE_INT64, TYPE_UINT32, TYPE_INT32 and TYPE_STRING"
            )
    return None
