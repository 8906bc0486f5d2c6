"""How a client wants an infer request's outputs returned (JSON or binary, classification,
shared memory), as decoded from the request; read by the response encoder."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class OutputPref:
    """How the client wants one output returned."""

    binary: bool = False
    class_count: int = 0
    shared_memory: bool = False


@dataclass(slots=True)
class OutputPrefs:
    """Output preferences of a request: explicit per-output ones, and the default for
    outputs the request did not name (``binary_data_output``; binary for raw bodies).
    Read-only once decoded: requests with the same preferences may share one.
    """

    default_binary: bool = False
    by_name: dict[str, OutputPref] = field(default_factory=dict)
    wants_classification: bool = False

    def get(self, name: str) -> OutputPref:
        pref = self.by_name.get(name)
        if pref is None:
            return BINARY_PREF if self.default_binary else JSON_PREF
        return pref


JSON_PREF = OutputPref()
BINARY_PREF = OutputPref(binary=True)
#: The preferences of a request that names no output and sets no parameter (shared).
DEFAULT_PREFS = OutputPrefs()
