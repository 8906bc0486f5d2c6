"""The life-cycle states of a model version, spelled as Triton spells them."""

from __future__ import annotations

import enum


class ModelState(str, enum.Enum):
    """A model version's state; the value is the text of Triton's repository index.

    UNKNOWN: found but never loaded. LOADING / UNLOADING: in transition. READY: serving.
    UNAVAILABLE: failed to load, or unloaded (the index then carries a reason).
    """

    UNKNOWN = "UNKNOWN"
    LOADING = "LOADING"
    READY = "READY"
    UNAVAILABLE = "UNAVAILABLE"
    UNLOADING = "UNLOADING"

    def __str__(self) -> str:
        return self.value
