"""What storage leaves in a repository is no model and no change of one.

KServe's model agent downloads a model into ``<repository>/<model>/`` and then writes a
``SUCCESS.<sha256 of the model spec>`` file beside it; a PersistentVolumeClaim mounted as
the repository brings its file system's ``lost+found``; ConfigMap and Secret volumes bring
hidden ``..data`` links. Triton tries to load ``lost+found`` as a model and fails.
"""

from __future__ import annotations

import os
from pathlib import Path

from tritium.repository import available_versions, scan_repositories
from tritium.repository.fingerprint import model_fingerprint
from tritium.repository.litter import is_litter


def kserve_pulled_model(repo: Path, name: str) -> Path:
    model = repo / name
    (model / "1").mkdir(parents=True)
    (model / "1" / "model.py").write_text("class TritonPythonModel: pass\n")
    (model / "config.pbtxt").write_text(f'name: "{name}"\nbackend: "python"\n')
    return model


def test_kserve_storage_leftovers_are_not_models(tmp_path: Path) -> None:
    repo = tmp_path / "mnt-models"
    model = kserve_pulled_model(repo, "add_sub")
    (model / ("SUCCESS." + "ab" * 32)).write_text('{"storageUri": "s3://b/add_sub"}')
    (repo / "lost+found").mkdir()
    (repo / "..2026_12_04_16_00_00.123").mkdir()
    os.symlink(repo / "..2026_12_04_16_00_00.123", repo / "..data")
    (repo / ".kserve-tmp").mkdir()
    (repo / ("SUCCESS." + "cd" * 32)).write_text("{}")
    assert list(scan_repositories([repo])) == ["add_sub"]
    assert available_versions(model) == [1]


def test_a_download_marker_is_not_a_change_for_poll_mode(tmp_path: Path) -> None:
    model = kserve_pulled_model(tmp_path, "m")
    before = model_fingerprint(model)
    (model / ("SUCCESS." + "ef" * 32)).write_text("{}")
    assert model_fingerprint(model) == before
    (model / "1" / "model.py").write_text("class TritonPythonModel: pass  # v2\n")
    assert model_fingerprint(model) != before


def test_litter_names() -> None:
    for name in ("lost+found", ".git", "..data", "SUCCESS.0123abcd"):
        assert is_litter(name), name
    for name in ("add_sub", "1", "config.pbtxt", "SUCCESS", "success.txt", "model.py"):
        assert not is_litter(name), name
