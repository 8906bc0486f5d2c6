"""A model as the manager and the repository index see it: its versions and their states.

``ModelEntry.versions`` is what requests read; the manager replaces it whole, never edits it
in place, so every request sees one consistent map. The index and the start-up table are
built from the entries here.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from tritium import repository as repo
from tritium.repository.fingerprint import Fingerprint
from tritium.service.model.interface import ServedVersion
from tritium.workers import ModelInstance

READY, UNAVAILABLE, LOADING, UNLOADING = "READY", "UNAVAILABLE", "LOADING", "UNLOADING"
UNLOADED = "unloaded"


@dataclass(slots=True)
class VersionStatus:
    version: int
    state: str  # READY | UNAVAILABLE | LOADING | UNLOADING
    reason: str = ""
    loaded: ServedVersion | None = None


@dataclass(slots=True)
class ModelEntry:
    name: str
    source: repo.ModelSource | None = None
    # Replaced whole, never edited in place, so a request reads one consistent map.
    versions: dict[int, VersionStatus] = field(default_factory=dict)
    state: str = "UNKNOWN"
    reason: str = ""
    config: dict[str, Any] | None = None
    # Whether the model is meant to be loaded (readiness counts only those).
    wanted: bool = False
    # What the serving versions were built from: folder, fingerprint, overridden or not.
    model_dir: Path | None = None
    stamp: Fingerprint | None = None
    overridden: bool = False
    # The fingerprint of the last load attempt, and its error ("" when it loaded).
    attempted: Fingerprint | None = None
    load_error: str = ""
    # Versions being built for the next swap (shown LOADING when nothing serves them).
    loading: tuple[int, ...] = ()
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)

    def default_version(self) -> ServedVersion | None:
        """The highest loaded version (asked on every request without a version)."""
        best: VersionStatus | None = None
        for status in self.versions.values():
            if status.loaded is not None and (best is None or status.version > best.version):
                best = status
        return best.loaded if best is not None else None

    def has_loaded(self) -> bool:
        return any(s.loaded is not None for s in self.versions.values())


def table_rows(models: dict[str, ModelEntry]) -> list[tuple[str, str, str]]:
    """Rows of the start-up model table: (model, version, status)."""
    rows = []
    for name in sorted(models):
        entry = models[name]
        if not entry.versions:
            rows.append((name, "-", f"UNAVAILABLE: {entry.reason}"))
        for number in sorted(entry.versions):
            status = entry.versions[number]
            text = status.state if not status.reason else f"{status.state}: {status.reason}"
            rows.append((name, str(number), text))
    return rows


def index_lines(
    models: dict[str, ModelEntry], folder_names: Collection[str], ready_only: bool
) -> list[dict[str, Any]]:
    """Triton's repository index: one line per version with its state and reason, one
    line per model without versions (its state and reason when it failed, just its
    name when it was never loaded). Models loaded from override files are listed too."""
    lines: list[dict[str, Any]] = []
    folders = set(folder_names)
    for name in sorted(folders | set(models)):
        entry = models.get(name)
        if name not in folders and entry is not None:
            # Gone from the repository: listed while loaded or meant to be.
            if not entry.wanted and not entry.has_loaded():
                continue
        versions = dict(entry.versions) if entry is not None else {}
        if entry is not None:
            for number in entry.loading:
                versions.setdefault(number, VersionStatus(number, LOADING))
        if not versions:
            if entry is None or entry.state in ("UNKNOWN", READY):
                if not ready_only:
                    lines.append({"name": name})
            elif not ready_only:
                line = {"name": name, "state": entry.state}
                if entry.reason:
                    line["reason"] = entry.reason
                lines.append(line)
            continue
        for number in sorted(versions):
            status = versions[number]
            state, reason = status.state, status.reason
            if state == READY and status.loaded is not None:
                state, reason = restart_view(status.loaded.instances, reason)
            if ready_only and state != READY:
                continue
            line = {"name": name, "version": str(number), "state": state}
            if reason:
                line["reason"] = reason
            lines.append(line)
    return lines


def restart_view(instances: Sequence[ModelInstance], reason: str = "") -> tuple[str, str]:
    """A served version's index state and reason while instances wait to be restarted:
    UNAVAILABLE when none is running, and for each waiting instance why it is down and
    when its next attempt is (in seconds and as UTC time)."""
    waits = [i.waiting for i in instances if i.waiting is not None]
    if not waits:
        return READY, reason
    now = time.monotonic()
    wall = time.time()
    notes = []
    for wait in waits:
        delay = max(wait.next_attempt - now, 0.0)
        at = datetime.fromtimestamp(wall + delay, timezone.utc).strftime("%H:%M:%S.%f")[:-3]
        notes.append(
            f"{wait.reason}; restarted {wait.restarts} time{'' if wait.restarts == 1 else 's'}"
            f", next attempt in {delay:.1f} s (at {at} UTC)"
        )
    running = any(i.running for i in instances)
    return (READY if running else UNAVAILABLE), "; ".join(filter(None, (reason, *notes)))
