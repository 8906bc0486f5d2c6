"""The dynamic batcher's settings, read from a model configuration's JSON form.

``BatchingConfig.from_config`` takes the dict ``tritium.config.config_to_json`` produces
(Triton's snake_case document): ``dynamic_batching`` with its queue policies, plus the
model's ``max_batch_size`` and the per-input flags that decide which inputs must have
equal shapes inside a batch. Protobuf renders 64-bit integers as strings and Triton turns
only some of them back into numbers, so every integer here is accepted either way.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

# Triton leaves max_queue_size 0 unbounded; we never do, so that a stalled model cannot
# grow a queue without limit. Applied per priority level, like max_queue_size itself.
DEFAULT_QUEUE_CAP = 65536


class TimeoutAction(enum.Enum):
    """What happens to a queued request whose timeout has expired (ModelQueuePolicy)."""

    REJECT = "REJECT"  # fail it with UNAVAILABLE "Request timeout expired"
    DELAY = "DELAY"  # keep it, behind every unexpired request of its level


@dataclass(frozen=True, slots=True)
class QueuePolicy:
    """One priority level's ``ModelQueuePolicy``."""

    timeout_action: TimeoutAction = TimeoutAction.REJECT
    default_timeout_us: int = 0  # 0: requests never time out
    allow_timeout_override: bool = False  # a request may shorten, never lengthen, it
    max_queue_size: int = 0  # 0: bounded only by the hard cap


@dataclass(frozen=True, slots=True)
class BatchingConfig:
    """Everything ``BatchPolicy`` needs; defaults are ``dynamic_batching {}``."""

    max_batch_size: int
    preferred_batch_sizes: tuple[int, ...] = ()  # empty: max_batch_size, as Triton
    max_queue_delay_us: int = 0
    preserve_ordering: bool = False
    priority_levels: int = 0  # 0: one level for every request
    default_priority_level: int = 0
    default_queue_policy: QueuePolicy = QueuePolicy()
    priority_queue_policies: Mapping[int, QueuePolicy] = field(default_factory=dict)
    # Inputs whose non-batch dims must match across a batch: variable-sized (-1) dims
    # and not ``allow_ragged_batch``; fixed-size inputs always match already.
    equal_shape_inputs: frozenset[str] = frozenset()
    # With optional inputs, only requests carrying the same input names batch together.
    has_optional_inputs: bool = False
    queue_cap: int = DEFAULT_QUEUE_CAP

    @classmethod
    def from_config(
        cls, config: Mapping[str, Any], *, queue_cap: int = DEFAULT_QUEUE_CAP
    ) -> BatchingConfig:
        """Read a model configuration in Triton's JSON form.

        A configuration without ``dynamic_batching`` reads as ``dynamic_batching {}``.
        Range checks (priority levels, preferred sizes) belong to config validation,
        which runs before a scheduler is built.
        """
        batching: Mapping[str, Any] = config.get("dynamic_batching") or {}
        policies = {
            _int(level): _queue_policy(policy)
            for level, policy in (batching.get("priority_queue_policy") or {}).items()
        }
        equal_shape: set[str] = set()
        optional = False
        for spec in config.get("input") or ():
            optional = optional or bool(spec.get("optional", False))
            dims = [_int(d) for d in spec.get("dims") or ()]
            if -1 in dims and not spec.get("allow_ragged_batch", False):
                equal_shape.add(spec["name"])
        return cls(
            max_batch_size=_int(config.get("max_batch_size", 0)),
            preferred_batch_sizes=tuple(
                sorted({_int(s) for s in batching.get("preferred_batch_size") or ()})
            ),
            max_queue_delay_us=_int(batching.get("max_queue_delay_microseconds", 0)),
            preserve_ordering=bool(batching.get("preserve_ordering", False)),
            priority_levels=_int(batching.get("priority_levels", 0)),
            default_priority_level=_int(batching.get("default_priority_level", 0)),
            default_queue_policy=_queue_policy(batching.get("default_queue_policy") or {}),
            priority_queue_policies=policies,
            equal_shape_inputs=frozenset(equal_shape),
            has_optional_inputs=optional,
            queue_cap=queue_cap,
        )


def _queue_policy(data: Mapping[str, Any]) -> QueuePolicy:
    action = data.get("timeout_action", "REJECT")
    # Enums arrive by name from JSON, by number from a raw protobuf dict (REJECT = 0).
    delay = action in ("DELAY", 1, "1")
    return QueuePolicy(
        timeout_action=TimeoutAction.DELAY if delay else TimeoutAction.REJECT,
        default_timeout_us=_int(data.get("default_timeout_microseconds", 0)),
        allow_timeout_override=bool(data.get("allow_timeout_override", False)),
        max_queue_size=_int(data.get("max_queue_size", 0)),
    )


def _int(value: Any) -> int:
    if isinstance(value, bool):
        raise ValueError(f"expected an integer, got {value!r}")
    return int(value)
