"""scan_repositories: which folders are models, across one or several repositories."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tritium.core.errors import InvalidArgument
from tritium.repository import (
    DUPLICATE_REASON,
    DuplicateModelError,
    ModelSource,
    RepositoryError,
    scan_repositories,
)


def make_models(root: Path, *names: str) -> Path:
    for name in names:
        (root / name / "1").mkdir(parents=True)
    return root


def test_every_subfolder_is_a_model(tmp_path: Path) -> None:
    repo = make_models(tmp_path / "repo", "b_model", "a_model")
    (repo / "README.md").write_text("not a model")
    (repo / "empty").mkdir()  # no config, no versions: still a model, as in Triton
    models = scan_repositories([repo])
    assert list(models) == ["a_model", "b_model", "empty"]  # sorted by name
    assert models["a_model"] == ModelSource("a_model", repo / "a_model", repo)


def test_hidden_folders_are_skipped(tmp_path: Path) -> None:
    repo = make_models(tmp_path / "repo", "m", ".git", ".ipynb_checkpoints")
    assert list(scan_repositories([repo])) == ["m"]


def test_symlinked_model_folder_counts(tmp_path: Path) -> None:
    make_models(tmp_path / "elsewhere", "real")
    repo = tmp_path / "repo"
    repo.mkdir()
    os.symlink(tmp_path / "elsewhere" / "real", repo / "linked")
    os.symlink(tmp_path / "nowhere", repo / "dangling")
    assert list(scan_repositories([repo])) == ["linked"]


def test_models_from_several_repositories(tmp_path: Path) -> None:
    first = make_models(tmp_path / "r1", "a")
    second = make_models(tmp_path / "r2", "b")
    models = scan_repositories([first, second])
    assert models["a"].repository == first
    assert models["b"].repository == second
    assert models["b"].path == second / "b"


def test_empty_repository_has_no_models(tmp_path: Path) -> None:
    assert scan_repositories([tmp_path]) == {}
    assert scan_repositories([]) == {}


def test_duplicate_name_names_model_and_both_repositories(tmp_path: Path) -> None:
    first = make_models(tmp_path / "r1", "dup", "only1")
    second = make_models(tmp_path / "r2", "dup", "only2")
    with pytest.raises(DuplicateModelError) as info:
        scan_repositories([first, second])
    error = info.value
    assert isinstance(error, RepositoryError) and isinstance(error, InvalidArgument)
    assert "'dup'" in error.message
    assert str(first) in error.message and str(second) in error.message
    assert error.duplicates == {"dup": (first, second)}
    # What is left to serve when the caller carries on, as Triton does without
    # --exit-on-error: every other model.
    assert sorted(error.models) == ["only1", "only2"]
    assert DUPLICATE_REASON == "model appears in two or more repositories"


def test_same_repository_twice_is_not_a_duplicate(tmp_path: Path) -> None:
    repo = make_models(tmp_path / "repo", "m")
    assert list(scan_repositories([repo, tmp_path / "repo" / ".." / "repo"])) == ["m"]


def test_missing_repository(tmp_path: Path) -> None:
    with pytest.raises(RepositoryError, match="model repository '.*absent' does not exist"):
        scan_repositories([tmp_path / "absent"])


def test_repository_that_is_a_file(tmp_path: Path) -> None:
    path = tmp_path / "file"
    path.write_text("")
    with pytest.raises(RepositoryError, match="is not a directory"):
        scan_repositories([path])
