"""An instance group's ``rate_limiter { resources [...] priority }``, read from a config.

Triton's rules for the values: a resource is a name and a count, on the instance's device
unless ``global: true``; the priority weighs the group's instances when several wait (1
when not given: Triton reads 0 as 1).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class ResourceUse:
    """Copies of one resource an instance needs to run a batch."""

    name: str
    count: int
    is_global: bool = False


@dataclass(frozen=True, slots=True)
class GroupRateLimiter:
    """The rate limiter settings of one instance group (every instance of it has them)."""

    resources: tuple[ResourceUse, ...] = ()
    priority: int = 1


def group_rate_limiter(group: Mapping[str, Any]) -> GroupRateLimiter:
    """The ``rate_limiter`` of an instance group of a config as JSON (``config_to_json``);
    the defaults when it has none. A name listed twice keeps its last count, as in Triton."""
    spec = group.get("rate_limiter")
    if not spec:
        return GroupRateLimiter()
    totals: dict[tuple[str, bool], int] = {}
    for resource in spec.get("resources", ()):
        key = (str(resource.get("name", "")), bool(resource.get("global", False)))
        totals[key] = int(resource.get("count", 0))
    uses = tuple(ResourceUse(name, count, is_global) for (name, is_global), count in totals.items())
    return GroupRateLimiter(uses, max(int(spec.get("priority", 0)), 1))
