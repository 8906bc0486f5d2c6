"""Which models a model needs loaded before it can load.

The model manager loads these first, and ``unload_dependents`` unloads them with the model
when no other loaded model still needs them. Ensembles need their steps' models; every
other model needs none.
"""

from __future__ import annotations

from typing import Any

from tritium import config as cfg
from tritium.config.backends import ENSEMBLE_PLATFORM


def is_ensemble(pb: cfg.ModelConfig) -> bool:
    """Whether the model is an ensemble (built by the ensemble builder, not in workers)."""
    return pb.platform == ENSEMBLE_PLATFORM or pb.HasField("ensemble_scheduling")


def model_dependencies(config: Any) -> list[str]:
    """The names of the models ``config`` (a ModelConfig or its JSON dict) depends on,
    in first-use order, without repeats."""
    if isinstance(config, dict):
        steps = (config.get("ensemble_scheduling") or {}).get("step") or ()
        names = [str(step.get("model_name", "")) for step in steps]
    else:
        names = [step.model_name for step in config.ensemble_scheduling.step]
    return [name for name in dict.fromkeys(names) if name]
