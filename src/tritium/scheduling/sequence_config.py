"""What the sequence batcher reads from a model's ``sequence_batching`` settings.

The configuration arrives in Triton's JSON form (defaults filled and validated at load):
the strategy and its limits, the control inputs the server fills, and the implicit state
tensors it keeps. Nothing here does I/O; initial state read from a ``data_file`` comes in
already loaded (see ``sequence_state.load_initial_states``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tritium.config.sequence_checks import FALSE_TRUE_TYPES
from tritium.core.datatypes import config_to_wire

DEFAULT_MAX_QUEUED = 4096  # requests waiting in the batcher, all sequences together

# Control kinds as Triton names them in the configuration.
START = "CONTROL_SEQUENCE_START"
END = "CONTROL_SEQUENCE_END"
READY = "CONTROL_SEQUENCE_READY"
CORRID = "CONTROL_SEQUENCE_CORRID"

# (config field, wire datatype) of a boolean control's false/true pair.
_FALSE_TRUE = tuple((field, config_to_wire(kind)) for field, kind in FALSE_TRUE_TYPES)


@dataclass(frozen=True, slots=True)
class ControlSpec:
    """One control input: its tensor name, kind, wire datatype and, for START, END and
    READY, the (false, true) values."""

    name: str
    kind: str
    datatype: str
    false_true: tuple[Any, Any] | None = None


@dataclass(frozen=True, slots=True)
class StateSpec:
    """One implicit state tensor (``sequence_batching.state[]``)."""

    input_name: str
    output_name: str
    datatype: str  # wire name, e.g. "FP32"
    dims: tuple[int, ...]
    # The initial state's name and source: "zero" (zero_data) or a data_file name.
    initial_name: str = ""
    initial_dims: tuple[int, ...] = ()
    data_file: str = ""


@dataclass(frozen=True, slots=True)
class SequenceConfig:
    model_name: str
    strategy: str  # "direct" | "oldest"
    max_batch_size: int
    slots_per_instance: int
    max_queue_delay_us: int
    preferred_batch_sizes: tuple[int, ...]
    minimum_slot_utilization: float
    preserve_ordering: bool
    max_sequence_idle_us: int
    controls: tuple[ControlSpec, ...] = ()
    states: tuple[StateSpec, ...] = ()
    config_outputs: tuple[str, ...] = ()  # the model's outputs, in configuration order
    max_queued: int = DEFAULT_MAX_QUEUED

    @property
    def batching(self) -> bool:
        """Tensors carry a batch dimension (``max_batch_size > 0``)."""
        return self.max_batch_size > 0

    @property
    def max_batch(self) -> int:
        """Requests in one batch: ``max_batch_size``, or one for a model without batching."""
        return max(1, self.max_batch_size)

    @classmethod
    def from_config(
        cls, config: Mapping[str, Any], *, max_queued: int = DEFAULT_MAX_QUEUED
    ) -> SequenceConfig:
        batching: Mapping[str, Any] = config.get("sequence_batching") or {}
        max_batch_size = int(config.get("max_batch_size", 0) or 0)
        max_batch = max(1, max_batch_size)
        oldest = batching.get("oldest")
        if oldest is not None:
            strategy = "oldest"
            settings: Mapping[str, Any] = oldest
            candidates = int(settings.get("max_candidate_sequences", 0) or 0)
            slots = candidates if candidates > 0 else max_batch
            preferred = tuple(sorted({int(s) for s in settings.get("preferred_batch_size") or ()}))
        else:  # direct is Triton's default strategy
            strategy = "direct"
            settings = batching.get("direct") or {}
            slots = max_batch
            preferred = ()
        return cls(
            model_name=str(config.get("name", "")),
            strategy=strategy,
            max_batch_size=max_batch_size,
            slots_per_instance=slots,
            max_queue_delay_us=int(settings.get("max_queue_delay_microseconds", 0) or 0),
            preferred_batch_sizes=preferred,
            minimum_slot_utilization=float(settings.get("minimum_slot_utilization", 0.0) or 0.0),
            preserve_ordering=bool(settings.get("preserve_ordering", False)),
            max_sequence_idle_us=int(batching.get("max_sequence_idle_microseconds", 0) or 0),
            controls=tuple(_controls(batching)),
            states=tuple(_states(batching)),
            config_outputs=tuple(o["name"] for o in config.get("output") or ()),
            max_queued=max_queued,
        )


def _controls(batching: Mapping[str, Any]) -> list[ControlSpec]:
    specs = []
    for control_input in batching.get("control_input") or ():
        for control in control_input.get("control") or ():
            kind = control.get("kind", START)
            if kind == CORRID:
                datatype = _wire(control.get("data_type", "TYPE_UINT64"))
                specs.append(ControlSpec(control_input["name"], kind, datatype))
                continue
            for key, wire in _FALSE_TRUE:
                values: Sequence[Any] = control.get(key) or ()
                if len(values) == 2:
                    specs.append(
                        ControlSpec(control_input["name"], kind, wire, (values[0], values[1]))
                    )
                    break
    return specs


def _states(batching: Mapping[str, Any]) -> list[StateSpec]:
    specs = []
    for state in batching.get("state") or ():
        initial = (state.get("initial_state") or [{}])[0]
        specs.append(
            StateSpec(
                input_name=state["input_name"],
                output_name=state["output_name"],
                datatype=_wire(state.get("data_type", "TYPE_FP32")),
                dims=tuple(int(d) for d in state.get("dims") or ()),
                initial_name=str(initial.get("name", "")),
                initial_dims=tuple(int(d) for d in initial.get("dims") or ()),
                data_file=str(initial.get("data_file", "") or ""),
            )
        )
    return specs


def _wire(config_type: str) -> str:
    return config_to_wire(str(config_type))
