"""The model table: every model the server knows, by name, with its versions.

Requests look their model version up here (``get``), and everything that walks every
loaded version (statistics, metrics, log settings, shutdown) walks ``loaded()``. The model
manager is the only writer: it replaces an entry's ``versions`` map whole, so a reader on
the event loop always sees one consistent map.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from tritium.core.errors import InvalidArgument, NotFound, Unavailable
from tritium.service.model.entry import READY, UNAVAILABLE, UNLOADED, ModelEntry
from tritium.service.model.interface import ServedVersion

_MAX_VERSION = 2**63 - 1  # Triton's versions are int64
# What C++'s std::stol reads, as Triton parses a requested version: leading white space,
# a sign, decimal digits; anything after them is ignored ("1x" is version 1).
_STOL = re.compile(r"[ \t\n\v\f\r]*([+-]?[0-9]+)")


def version_number(text: str) -> int:
    """The version a request names (non-empty ``text``), read as Triton reads it."""
    match = _STOL.match(text)
    number = int(match.group(1)) if match is not None else None
    if number is None or not -_MAX_VERSION - 1 <= number <= _MAX_VERSION:
        raise InvalidArgument(
            f"failed to get model version from specified version string '{text}' "
            "(details: stol), version should be an integral value > 0"
        )
    if number < 0:
        raise InvalidArgument(
            f"invalid model version specified '{text}' , version should be an integral value > 0"
        )
    return number


class ModelTable:
    """Models by name (``models``), their served versions, and readiness over them."""

    __slots__ = ("models",)

    def __init__(self) -> None:
        self.models: dict[str, ModelEntry] = {}

    def __contains__(self, name: object) -> bool:
        return name in self.models

    def entry(self, name: str) -> ModelEntry | None:
        return self.models.get(name)

    def get(self, name: str, version: str = "") -> ServedVersion:
        """The version a request names ("" for the model's default), or Triton's error."""
        entry = self.models.get(name)
        if entry is None:
            raise NotFound(f"Request for unknown model: '{name}' is not found")
        if version:
            number = int(version) if version.isdigit() and version.isascii() else None
            if number is None or number > _MAX_VERSION:
                number = version_number(version)
            status = entry.versions.get(number)
            if status is None:
                raise NotFound(
                    f"Request for unknown model: '{name}' version {number} is not found"
                )
            if status.loaded is None:
                raise Unavailable(
                    f"Request for unknown model: '{name}' version {number} is not at ready state"
                )
            return status.loaded
        loaded = entry.default_version()
        if loaded is None:
            raise NotFound(
                f"Request for unknown model: '{name}' has no available versions"
                + _failed_load(entry)
            )
        return loaded

    def loaded(self, name: str | None = None) -> Iterator[ServedVersion]:
        """Every loaded version (of model ``name`` only, when given), by model name then
        version number."""
        names = sorted(self.models) if name is None else [name] if name in self.models else []
        for model in names:
            versions = self.models[model].versions
            for number in sorted(versions):
                loaded = versions[number].loaded
                if loaded is not None:
                    yield loaded

    def all_ready(self) -> bool:
        """Every model meant to be loaded serves every version it selected."""
        for entry in self.models.values():
            if not entry.wanted:
                continue
            if entry.state != READY or not entry.versions:
                return False
            for status in entry.versions.values():
                if status.state == UNAVAILABLE and status.reason == UNLOADED:
                    continue
                if status.loaded is None or not status.loaded.ready:
                    return False
        return True

    def not_ready_reasons(self) -> list[str]:
        """Why each model that keeps :meth:`all_ready` false is not ready, one line each."""
        reasons: list[str] = []
        for name in sorted(self.models):
            entry = self.models[name]
            if not entry.wanted:
                continue
            found = len(reasons)
            for number in sorted(entry.versions):
                status = entry.versions[number]
                if status.state == UNAVAILABLE and status.reason == UNLOADED:
                    continue
                loaded = status.loaded
                if loaded is None:
                    why = status.reason or entry.reason
                    reasons.append(
                        f"model '{name}' version {number} is {status.state}"
                        + (f": {why}" if why else "")
                    )
                    continue
                for instance in loaded.instances:
                    if not instance.running:
                        reasons.append(
                            f"model '{name}' version {number} is not ready: instance "
                            f"'{instance.name}' is restarting"
                        )
                    elif not instance.ready:
                        reasons.append(
                            f"model '{name}' version {number} is not ready: instance "
                            f"'{instance.name}' answered False to is_ready()"
                        )
            if len(reasons) == found and (entry.state != READY or not entry.versions):
                reasons.append(
                    f"model '{name}' is {entry.state}" + (f": {entry.reason}" if entry.reason else "")
                )
        return reasons


def _failed_load(entry: ModelEntry) -> str:
    """Why a model serves nothing, when a load failed: Triton's text alone leaves the client
    guessing; the reason is already in the repository index."""
    why = entry.load_error or (entry.reason if entry.reason != UNLOADED else "")
    if not why:
        why = "; ".join(
            f"version {s.version}: {s.reason}"
            for s in sorted(entry.versions.values(), key=lambda s: s.version)
            if s.reason and s.reason != UNLOADED
        )
    return f" (failed to load '{entry.name}': {why})" if why else ""
