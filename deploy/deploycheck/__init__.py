"""Checks of tritium's deployment artifacts that run without a cluster.

`make deploy-check` runs all of them (`python -m deploycheck`); tests/deploy runs the fast
ones inside the test suite. Each check reports what it ran, or why it was skipped (a tool
that is not installed), so a machine without the tools still gets a clear answer.
"""

from __future__ import annotations

from deploycheck.outcome import Outcome, Skip

__all__ = ["Outcome", "Skip"]
