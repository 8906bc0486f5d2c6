"""A model's version folders, and which of them its version policy serves."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from tritonclient.grpc.model_config_pb2 import ModelVersionPolicy

from tritium.repository.scan import RepositoryError


@dataclass(frozen=True)
class VersionSelection:
    """The outcome of applying a version policy to the version folders present.

    ``selected``: versions to load, ascending. ``missing``: versions a ``specific``
    policy names that have no folder (Triton logs "version N is specified for model 'M',
    but the version directory is not present" and loads the others); always empty for
    ``latest`` and ``all``.
    """

    selected: tuple[int, ...]
    missing: tuple[int, ...] = ()


def is_version_folder_name(name: str) -> bool:
    """Triton's rule: a decimal number without leading zeros ("0" itself is version 0).

    Triton also accepts names that merely start with digits ("2abc" loads as version 2
    from a folder that is not "2", which then fails); tritium ignores those.
    """
    if not name.isdigit() or not name.isascii():
        return False
    return len(name) == 1 or name[0] != "0"


def available_versions(model_dir: Path) -> list[int]:
    """Version numbers of the version folders in ``model_dir``, ascending.

    Other entries ("configs", "warmup", "01", files) are ignored.
    """
    try:
        entries = list(os.scandir(model_dir))
    except OSError as exc:
        raise RepositoryError(
            f"failed to read model directory '{model_dir.name}': {exc.strerror or type(exc).__name__}"
        ) from None
    versions = []
    for entry in entries:
        if not is_version_folder_name(entry.name):
            continue
        try:
            if entry.is_dir():
                versions.append(int(entry.name))
        except OSError:
            continue
    return sorted(versions)


def select_versions(policy: ModelVersionPolicy, available: list[int]) -> VersionSelection:
    """Apply ``policy`` (an unset policy means ``latest { num_versions: 1 }``)."""
    present = sorted(set(available))
    choice = policy.WhichOneof("policy_choice")
    if choice == "specific":
        wanted = sorted(set(policy.specific.versions))
        have = set(present)
        return VersionSelection(
            selected=tuple(v for v in wanted if v in have),
            missing=tuple(v for v in wanted if v not in have),
        )
    if choice == "all":
        return VersionSelection(selected=tuple(present))
    count = policy.latest.num_versions if choice == "latest" else 1
    if count <= 0:
        return VersionSelection(selected=())
    return VersionSelection(selected=tuple(present[max(len(present) - count, 0) :]))


def versions_to_load(
    model_dir: Path, policy: ModelVersionPolicy, model_name: str
) -> VersionSelection:
    """``select_versions`` on the folders present; RepositoryError when nothing is selected.

    The error text is Triton's, which marks the model as failed to load.
    """
    selection = select_versions(policy, available_versions(model_dir))
    if not selection.selected:
        raise RepositoryError(
            "at least one version must be available under the version policy of "
            f"model '{model_name}'"
        )
    return selection
