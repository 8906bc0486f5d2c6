"""What one check did: ran (with a one-line summary), was skipped (and why), or failed."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "deploy" / "helm" / "tritium"
KSERVE = ROOT / "deploy" / "kserve"
EXAMPLES = ROOT / "examples" / "model_repository"


class Skip(Exception):
    """A check cannot run here; the message says which tool is missing."""


@dataclass(frozen=True)
class Outcome:
    name: str
    status: str  # "ok", "skipped" or "failed"
    detail: str

    def line(self) -> str:
        return f"{self.status.upper():8} {self.name}: {self.detail}"
