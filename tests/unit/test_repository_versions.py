"""Version folders, version policies and model states, following Triton's rules."""

from __future__ import annotations

from pathlib import Path

import pytest
from tritonclient.grpc.model_config_pb2 import ModelVersionPolicy

from tritium.config import parse_config_text
from tritium.repository import (
    ModelState,
    RepositoryError,
    VersionSelection,
    available_versions,
    is_version_folder_name,
    select_versions,
    versions_to_load,
)


def policy(text: str) -> ModelVersionPolicy:
    return parse_config_text(f"version_policy {{ {text} }}", "m").version_policy


def model_dir(tmp_path: Path, *entries: str) -> Path:
    root = tmp_path / "m"
    root.mkdir()
    for entry in entries:
        (root / entry).mkdir()
    return root


@pytest.mark.parametrize(
    "name, ok",
    [
        ("1", True),
        ("0", True),  # Triton loads a folder named "0" as version 0
        ("10", True),
        ("123456789", True),
        ("01", False),  # "ignore version directory '01' which contains leading zeros"
        ("00", False),
        ("-1", False),
        ("+5", False),
        ("2abc", False),
        ("1.0", False),
        (" 1", False),
        ("", False),
        ("²", False),  # a digit to str.isdigit, not a version
        ("configs", False),
        ("warmup", False),
    ],
)
def test_version_folder_names(name: str, ok: bool) -> None:
    assert is_version_folder_name(name) is ok


def test_available_versions_numeric_folders_sorted(tmp_path: Path) -> None:
    root = model_dir(tmp_path, "10", "2", "1", "0", "01", "abc", "configs", "warmup", "3x")
    (root / "7").write_text("a file, not a folder")
    assert available_versions(root) == [0, 1, 2, 10]


def test_no_versions(tmp_path: Path) -> None:
    assert available_versions(model_dir(tmp_path)) == []


def test_available_versions_of_missing_folder(tmp_path: Path) -> None:
    with pytest.raises(RepositoryError, match="failed to read model directory 'gone'"):
        available_versions(tmp_path / "gone")


@pytest.mark.parametrize(
    "text, available, selected, missing",
    [
        ("latest { num_versions: 1 }", [1, 2, 3], (3,), ()),
        ("latest { num_versions: 2 }", [3, 1, 2], (2, 3), ()),
        ("latest { num_versions: 5 }", [1, 2], (1, 2), ()),
        ("latest { num_versions: 0 }", [1, 2], (), ()),
        ("latest { num_versions: 1 }", [], (), ()),
        ("all { }", [2, 1, 0], (0, 1, 2), ()),
        ("all { }", [], (), ()),
        ("specific { versions: [ 1, 3 ] }", [1, 2], (1,), (3,)),
        ("specific { versions: [ 3, 1, 3 ] }", [1, 2, 3], (1, 3), ()),
        ("specific { versions: [ 4 ] }", [1], (), (4,)),
        ("specific { versions: [ -1 ] }", [1], (), (-1,)),
    ],
)
def test_select_versions(
    text: str, available: list[int], selected: tuple[int, ...], missing: tuple[int, ...]
) -> None:
    assert select_versions(policy(text), available) == VersionSelection(selected, missing)


def test_unset_policy_is_latest_one() -> None:
    assert select_versions(ModelVersionPolicy(), [4, 9, 7]).selected == (9,)


def test_versions_to_load(tmp_path: Path) -> None:
    root = model_dir(tmp_path, "1", "2")
    selection = versions_to_load(root, policy("specific { versions: [ 1, 3 ] }"), "vpol")
    assert selection == VersionSelection((1,), (3,))


def test_versions_to_load_without_versions_uses_triton_text(tmp_path: Path) -> None:
    root = model_dir(tmp_path, "01", "configs")
    with pytest.raises(RepositoryError) as info:
        versions_to_load(root, ModelVersionPolicy(), "nover")
    assert info.value.message == (
        "at least one version must be available under the version policy of model 'nover'"
    )


def test_model_state_strings_are_tritons() -> None:
    assert [s.value for s in ModelState] == [
        "UNKNOWN",
        "LOADING",
        "READY",
        "UNAVAILABLE",
        "UNLOADING",
    ]
    assert str(ModelState.READY) == "READY"
    assert f"{ModelState.UNAVAILABLE}" == "UNAVAILABLE"
    assert ModelState("READY") is ModelState.READY
