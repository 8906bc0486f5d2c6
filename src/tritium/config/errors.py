"""The one error type for a model configuration that cannot be read or served."""

from __future__ import annotations

from typing import Literal

from tritium.core.errors import InvalidArgument

Phase = Literal["repository", "load"]


class ConfigError(InvalidArgument):
    """A ``config.pbtxt`` that cannot be parsed, or that fails validation.

    ``phase`` says when Triton reports the same problem:

    - ``"repository"``: while polling the repository. Triton then never creates the
      model: it has no versions, no state, and the repository index lists only its name.
    - ``"load"``: while loading a version. The model is listed, each version it tried is
      ``UNAVAILABLE`` and the message is that version's reason.
    """

    def __init__(self, message: str, *, phase: Phase = "repository") -> None:
        super().__init__(message)
        self.phase: Phase = phase
