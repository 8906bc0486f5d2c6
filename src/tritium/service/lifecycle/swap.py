"""How a load's outcome changes a model's entry: the swap of its versions map (one
assignment, so a request sees the old map or the new one), or, when nothing of a load
could be used, what served keeps serving with the reason recorded."""

from __future__ import annotations

from pathlib import Path

from tritium.repository.fingerprint import Fingerprint
from tritium.service.lifecycle.builder import Built
from tritium.service.model.entry import READY, UNAVAILABLE, UNLOADED, ModelEntry, VersionStatus
from tritium.service.model.interface import ServedVersion


def keep_serving(
    entry: ModelEntry, reason: str, model_dir: Path, stamp: Fingerprint | None, overridden: bool
) -> None:
    """A load that failed before any version was built: what served keeps serving."""
    entry.attempted, entry.load_error = stamp, reason
    if entry.has_loaded():
        entry.versions = {
            v: VersionStatus(v, s.state, kept_reason(reason), s.loaded)
            if s.loaded is not None
            else s
            for v, s in entry.versions.items()
        }
        return
    entry.versions = {}
    entry.state, entry.reason = UNAVAILABLE, reason
    entry.model_dir, entry.stamp, entry.overridden = model_dir, None, overridden


def swap_versions(
    entry: ModelEntry, built: Built, model_dir: Path, stamp: Fingerprint | None, overridden: bool
) -> list[ServedVersion]:
    """Put the built versions in service in one assignment; returns the versions they
    replaced (to be retired)."""
    old = entry.versions
    new: dict[int, VersionStatus] = {}
    for number, loaded in built.loaded.items():
        new[number] = VersionStatus(number, READY, "", loaded)
    for number, reason in built.failed.items():
        previous = old.get(number)
        if previous is not None and previous.loaded is not None:
            new[number] = VersionStatus(number, READY, kept_reason(reason), previous.loaded)
        else:
            new[number] = VersionStatus(number, UNAVAILABLE, reason)
    kept = {id(s.loaded) for s in new.values() if s.loaded is not None}
    retired: list[ServedVersion] = []
    for number, status in old.items():
        if status.loaded is not None and id(status.loaded) not in kept:
            retired.append(status.loaded)
        if number not in new:
            was_loaded = status.loaded is not None or status.reason == UNLOADED
            new[number] = VersionStatus(
                number, UNAVAILABLE, UNLOADED if was_loaded else status.reason
            )
    entry.versions = new  # the swap
    entry.config = built.config
    entry.state = READY if built.loaded else UNAVAILABLE
    entry.reason = "" if built.loaded else "no version could be loaded"
    entry.model_dir, entry.stamp, entry.overridden = model_dir, stamp, overridden
    entry.attempted = stamp
    entry.load_error = "; ".join(built.failed.values())
    return retired


def kept_reason(reason: str) -> str:
    return f"the previous load keeps serving; the new load failed: {reason}"
