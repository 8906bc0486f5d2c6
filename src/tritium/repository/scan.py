"""Find the models in one or more model repository folders."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from tritium.core.errors import InvalidArgument
from tritium.repository.litter import is_litter

# Triton's reason for a model whose name is in several repositories.
DUPLICATE_REASON = "model appears in two or more repositories"


class RepositoryError(InvalidArgument):
    """A model repository that cannot be served as given."""


class DuplicateModelError(RepositoryError):
    """One or more model names appear in several repositories.

    Triton refuses to load such a model (reason: ``DUPLICATE_REASON``) and, with its
    default ``--exit-on-error=true``, fails start-up. A caller that keeps serving instead
    finds the other models in ``models`` and the clashing ones in ``duplicates``.
    """

    def __init__(
        self,
        message: str,
        *,
        duplicates: dict[str, tuple[Path, ...]],
        models: dict[str, ModelSource],
    ) -> None:
        super().__init__(message)
        self.duplicates = duplicates
        self.models = models


@dataclass(frozen=True)
class ModelSource:
    """Where a model lives: ``path`` is ``repository / name``."""

    name: str
    path: Path
    repository: Path


def scan_repositories(roots: list[Path]) -> dict[str, ModelSource]:
    """Every model in ``roots``, by name, sorted by name.

    Each immediate sub-folder of a root is a model, as in Triton; files are ignored, and
    so are hidden folders (``.git``, ``.ipynb_checkpoints``) and the ``lost+found`` of a
    mounted volume (see ``litter``), which Triton would try and fail to load. A missing or
    unreadable root raises RepositoryError; a name found in more than one root raises
    DuplicateModelError naming the model and its repositories.
    """
    found: dict[str, list[ModelSource]] = {}
    seen_roots: set[Path] = set()
    for root in roots:
        # The same folder given twice is one repository, not a clash with itself.
        resolved = root.resolve()
        if resolved in seen_roots:
            continue
        seen_roots.add(resolved)
        for name in _model_folders(root):
            found.setdefault(name, []).append(ModelSource(name, root / name, root))

    models = {name: sources[0] for name, sources in sorted(found.items()) if len(sources) == 1}
    duplicates = {
        name: tuple(s.repository for s in sources)
        for name, sources in sorted(found.items())
        if len(sources) > 1
    }
    if duplicates:
        lines = [
            f"model '{name}' appears in more than one model repository: "
            + ", ".join(f"'{r}'" for r in repos)
            for name, repos in duplicates.items()
        ]
        raise DuplicateModelError("; ".join(lines), duplicates=duplicates, models=models)
    return models


def _model_folders(root: Path) -> list[str]:
    try:
        entries = list(os.scandir(root))
    except FileNotFoundError:
        raise RepositoryError(f"model repository '{root}' does not exist") from None
    except NotADirectoryError:
        raise RepositoryError(f"model repository '{root}' is not a directory") from None
    except OSError as exc:
        raise RepositoryError(
            f"failed to read model repository '{root}': {exc.strerror or type(exc).__name__}"
        ) from None
    names = []
    for entry in entries:
        if is_litter(entry.name):
            continue
        try:
            # Follows symlinks, as Triton's stat() does: a linked model folder counts.
            if entry.is_dir():
                names.append(entry.name)
        except OSError:
            continue
    return sorted(names)
