"""Cloud repository locations as Triton spells them (user_guide/model_repository.md,
"Cloud Storage"), the local folder each is copied into (Triton's
TRITON_*_MOUNT_DIRECTORY, else a temporary one), and the one-line errors of a location
that cannot be served: a missing extra names the pip command."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tritium.repository.cloud_url import cloud_scheme, parse_cloud_location
from tritium.repository.location import repository_roots
from tritium.repository.remote import MANIFEST, RemoteRepository, copy_folder
from tritium.repository.scan import RepositoryError


@pytest.mark.parametrize(
    ("text", "root", "endpoint"),
    [
        ("s3://bucket/path/to/repo", "bucket/path/to/repo", None),
        ("s3://bucket", "bucket", None),
        ("s3://bucket/repo/", "bucket/repo", None),
        # A private instance: host:port, HTTP unless https:// is spelled out (Triton).
        ("s3://minio.local:9000/bucket/repo", "bucket/repo", "http://minio.local:9000"),
        ("s3://https://minio.local:443/bucket/repo", "bucket/repo", "https://minio.local:443"),
        ("s3://http://127.0.0.1:5000/b/r", "b/r", "http://127.0.0.1:5000"),
    ],
)
def test_s3_locations(text: str, root: str, endpoint: str | None) -> None:
    location = parse_cloud_location(text)
    assert (location.scheme, location.root) == ("s3", root)
    assert location.options.get("client_kwargs", {}).get("endpoint_url") == endpoint
    assert location.store.extra == "s3"


def test_gcs_and_azure_locations(monkeypatch: pytest.MonkeyPatch) -> None:
    gs = parse_cloud_location("gs://bucket/path/repo")
    assert (gs.root, gs.store.protocol, gs.store.extra) == ("bucket/path/repo", "gcs", "gcs")
    monkeypatch.setenv("AZURE_STORAGE_KEY", "a-key")
    azure = parse_cloud_location("as://account/container/path")
    assert azure.root == "container/path"
    assert azure.options == {"account_name": "account", "account_key": "a-key"}
    monkeypatch.delenv("AZURE_STORAGE_KEY")
    # No key: Azure's default credential chain (managed identity ...).
    assert parse_cloud_location("as://account/c").options == {
        "account_name": "account",
        "anon": False,
    }


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("s3://", "no bucket named"),
        ("s3://host:9000/", "no bucket named"),
        ("gs://", "no bucket named"),
        ("as://account", "no container named"),
        ("as:///container", "no storage account (as://account/container/path)"),
        ("s3://bucket/../etc", "'.' and '..' are not path parts"),
    ],
)
def test_locations_that_name_no_store_path(text: str, words: str) -> None:
    with pytest.raises(RepositoryError) as info:
        parse_cloud_location(text)
    assert str(info.value) == f"model repository '{text}': {words}"


def test_cloud_schemes_are_triton_s_and_any_case() -> None:
    assert [cloud_scheme(t) for t in ("s3://b", "GS://b", "as://a/c")] == ["s3", "gs", "as"]
    assert [cloud_scheme(t) for t in ("/models", "models", "ftp://h/m", "s3:/b")] == [None] * 4


@pytest.mark.parametrize(
    ("text", "package", "extra"),
    [("s3://b/r", "s3fs", "s3"), ("gs://b/r", "gcsfs", "gcs"), ("as://a/c/r", "adlfs", "azure")],
)
def test_a_missing_extra_names_the_pip_command(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, text: str, package: str, extra: str
) -> None:
    monkeypatch.setitem(sys.modules, package, None)  # import fails, as when not installed
    remote = RemoteRepository(text, tmp_path, owned=False)
    with pytest.raises(RepositoryError) as info:
        remote.open()
    assert str(info.value) == (
        f"model repository '{text}': reading {text[:2]}:// repositories needs the "
        f"{package} package: pip install 'tritium[{extra}]'"
    )


def test_the_copy_goes_to_triton_s_mount_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TRITON_AWS_MOUNT_DIRECTORY", str(tmp_path))
    assert copy_folder("s3://b/r", 0, 1) == (tmp_path, False)
    # Several s3:// repositories share the variable: one numbered folder each.
    assert copy_folder("s3://b/r2", 3, 2) == (tmp_path / "3", False)
    assert (tmp_path / "3").is_dir()
    # Without the variable: a temporary folder, tritium's to remove.
    folder, owned = copy_folder("gs://b/r", 0, 1)
    try:
        assert owned and folder.is_dir() and folder.name.startswith("tritium-gs-repository-")
    finally:
        folder.rmdir()


def test_a_temporary_copy_is_removed_at_close(tmp_path: Path) -> None:
    folder = tmp_path / "copy"
    folder.mkdir()
    (folder / "model").mkdir()
    RemoteRepository("s3://b/r", folder, owned=True).close()
    assert not folder.exists()
    kept = tmp_path / "mount"
    kept.mkdir()
    RemoteRepository("s3://b/r", kept, owned=False).close()
    assert kept.is_dir()


def test_a_mount_directory_must_exist_and_be_empty_or_an_earlier_copy(tmp_path: Path) -> None:
    pytest.importorskip("s3fs")
    with pytest.raises(RepositoryError, match="TRITON_AWS_MOUNT_DIRECTORY folder .* does not"):
        RemoteRepository("s3://b/r", tmp_path / "missing", owned=False).open()
    (tmp_path / "stray.txt").write_text("not ours")
    with pytest.raises(RepositoryError, match="is not empty and holds no earlier copy"):
        RemoteRepository("s3://b/r", tmp_path, owned=False).open()
    (tmp_path / MANIFEST).write_text("{}")
    RemoteRepository("s3://b/r", tmp_path, owned=False).open()  # an earlier copy: resumed


def test_repository_roots_serve_cloud_locations_from_their_copies(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TRITON_GCS_MOUNT_DIRECTORY", str(tmp_path))
    roots, remotes = repository_roots(["/models", "gs://bucket/repo"])
    assert roots == [Path("/models"), tmp_path]
    assert [(r.text, r.local, r.owned) for r in remotes] == [("gs://bucket/repo", tmp_path, False)]
