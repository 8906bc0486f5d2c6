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
    entry: ModelEntry,
    reason: str,
    model_dir: Path,
    stamp: Fingerprint | None,
    overridden: bool,
    failed: dict[int, str] | None = None,
) -> None:
    """A load of which nothing could be used: what served keeps serving. ``failed``
    names the versions the load was for, each with why it failed (see
    :func:`failed_status`: as Triton lists a new version that failed beside the one still
    serving, or the versions of a first load that failed). Without ``failed`` (the load
    failed before it chose versions) every serving version carries ``reason``."""
    entry.attempted, entry.load_error = stamp, reason
    serving = entry.has_loaded()
    if serving and not failed:
        failed = {v: reason for v, s in entry.versions.items() if s.loaded is not None}
    versions = dict(entry.versions) if serving else {}
    for number, why in (failed or {}).items():
        versions[number] = failed_status(number, why, versions.get(number))
    entry.versions = versions
    if not serving:
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
        new[number] = failed_status(number, reason, old.get(number))
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


def failed_status(number: int, reason: str, previous: VersionStatus | None) -> VersionStatus:
    """Version ``number`` after a load of it failed for ``reason``: still serving (READY,
    saying why its replacement is not) when ``previous`` served, else UNAVAILABLE."""
    if previous is not None and previous.loaded is not None:
        return VersionStatus(number, READY, kept_reason(reason), previous.loaded)
    return VersionStatus(number, UNAVAILABLE, reason)


def kept_reason(reason: str) -> str:
    return f"the previous load keeps serving; the new load failed: {reason}"
