"""How many threads one instance of a graph model runs with when its configuration does
not say: the instances of the model divide the cores this process may use, so that they
do not fight over them (every runtime's own default is all cores for each)."""

from __future__ import annotations

import os
from typing import Any


def usable_cores() -> int:
    """Cores this process may run on."""
    try:
        return max(len(os.sched_getaffinity(0)), 1)
    except AttributeError:  # not on Linux
        return max(os.cpu_count() or 1, 1)


def instance_count(config: dict[str, Any]) -> int:
    """How many instances the configuration starts (each runs its own session)."""
    return max(sum(int(g.get("count", 1) or 1) for g in config.get("instance_group", ())), 1)


def core_share(config: dict[str, Any], cores: int | None = None) -> int:
    """One instance's share of ``cores`` (default: the usable ones), at least 1."""
    return max((cores or usable_cores()) // instance_count(config), 1)
