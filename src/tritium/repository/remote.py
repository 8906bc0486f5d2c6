"""A cloud model repository's local copy, kept in step with the store.

tritium serves a cloud repository (``s3://``, ``gs://``, ``as://``; see ``cloud_url``) the
way Triton does: it copies it into a local folder and serves that folder with the
local-folder code. The folder is the one Triton's ``TRITON_*_MOUNT_DIRECTORY`` names (an
existing folder, empty or holding an earlier copy), else a temporary one removed at exit.

``sync()`` lists the store and brings the copy up to date, downloading only the objects
whose size or version tag (ETag, generation) changed since the last sync and deleting the
files whose objects went away, so a poll or a repository-API load that finds nothing new
costs one listing. Each file is written beside its place and renamed into it, so a scan
never reads half a file. What was synced is remembered in a hidden manifest file in the
copy, which is how a copy in a mount folder survives a restart without a full download.
All of it blocks: run it off the event loop.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import shutil
import tempfile
import threading
import weakref
from pathlib import Path
from typing import Any

from tritium.repository.cloud_url import STORES, CloudLocation, parse_cloud_location
from tritium.repository.scan import RepositoryError

MANIFEST = ".tritium-sync.json"
_PART = ".tritium-part"
# What identifies an object's content in each store's listing (besides its size).
_TAG_KEYS = ("ETag", "etag", "generation", "md5Hash", "LastModified", "last_modified", "mtime")

Listing = dict[str, list[Any]]


def copy_folder(text: str, index: int, same_scheme: int) -> tuple[Path, bool]:
    """The local folder for the ``index``-th repository ``text`` and whether tritium owns it
    (a temporary folder); ``same_scheme`` repositories share the store's mount variable, so
    with more than one each gets a numbered subfolder of it."""
    scheme = text.partition("://")[0].lower()
    mount = os.environ.get(STORES[scheme].mount_env, "")
    if mount and same_scheme > 1:
        folder = Path(mount) / str(index)
        if folder.parent.is_dir():
            folder.mkdir(exist_ok=True)
        return folder, False
    if mount:
        return Path(mount), False
    return Path(tempfile.mkdtemp(prefix=f"tritium-{scheme}-repository-")), True


class RemoteRepository:
    """The store at ``text``, copied into ``local`` (removed at ``close`` when ``owned``)."""

    def __init__(self, text: str, local: Path, *, owned: bool) -> None:
        self.text = text
        self.local = local
        self.owned = owned
        self._location: CloudLocation | None = None
        self._fs: Any = None
        self._lock = threading.Lock()
        self._manifest: Listing | None = None
        self._cleanup = (
            weakref.finalize(self, shutil.rmtree, str(local), True) if owned else None
        )

    def close(self) -> None:
        """Remove a temporary copy (a mount folder's copy stays for the next start)."""
        if self._cleanup is not None:
            self._cleanup()

    def open(self) -> None:
        """Parse the location, import the store's package, check the local folder: each
        failure a RepositoryError of one line. Nothing is read from the store yet."""
        if self._fs is not None:
            return
        location = parse_cloud_location(self.text)
        store = location.store
        try:
            importlib.import_module(store.package)
            import fsspec
        except ImportError:
            raise RepositoryError(
                f"model repository '{self.text}': reading {location.scheme}:// repositories "
                f"needs the {store.package} package: pip install 'tritium[{store.extra}]'"
            ) from None
        self._check_local(store.mount_env)
        self._fs = fsspec.filesystem(
            store.protocol, skip_instance_cache=True, use_listings_cache=False, **location.options
        )
        self._location = location

    def _check_local(self, mount_env: str) -> None:
        if self.owned:
            return
        if not self.local.is_dir():
            raise RepositoryError(
                f"model repository '{self.text}': {mount_env} folder '{self.local}' does not "
                "exist (it must be an existing, empty folder)"
            )
        entries = {e.name for e in os.scandir(self.local)}
        if entries and MANIFEST not in entries:
            raise RepositoryError(
                f"model repository '{self.text}': {mount_env} folder '{self.local}' is not "
                "empty and holds no earlier copy of a repository"
            )

    def sync(self, prefix: str = "") -> bool:
        """Bring the copy (or just its ``prefix`` folder, a model's name) up to date with the
        store; True when a file was written or removed. RepositoryError when the store
        cannot be listed or read (what was copied stays as it was)."""
        self.open()
        with self._lock:
            return self._sync(prefix.strip("/"))

    def _sync(self, prefix: str) -> bool:
        assert self._location is not None
        manifest = self._load_manifest()
        remote = self._list(prefix)
        changed = False
        try:
            for rel, tag in remote.items():
                target = self.local / rel
                if manifest.get(rel) == tag and _has_size(target, tag[0]):
                    continue
                self._download(rel, target)
                manifest[rel] = tag
                changed = True
            for rel in [r for r in manifest if _within(r, prefix) and r not in remote]:
                del manifest[rel]
                with contextlib.suppress(OSError):  # already gone is what we wanted
                    (self.local / rel).unlink()
                changed = True
            changed |= self._prune(prefix, manifest)
        finally:
            self._save_manifest(manifest)
        return changed

    def _list(self, prefix: str) -> dict[str, list[Any]]:
        """rel path -> [size, tag] of every object under the root (or its ``prefix``)."""
        assert self._location is not None
        root = self._location.root
        base = f"{root}/{prefix}" if prefix else root
        try:
            self._fs.invalidate_cache()
            found = self._fs.find(base, detail=True)
            if not found and not prefix and not self._fs.exists(root):
                # An object store has no empty folders: nothing under the path, no bucket.
                raise FileNotFoundError(root)
        except FileNotFoundError:
            if prefix:  # a model folder that is not (or no longer) in the store
                return {}
            raise RepositoryError(f"model repository '{self.text}' does not exist") from None
        except Exception as exc:  # noqa: BLE001 - each store raises its own errors
            raise RepositoryError(f"model repository '{self.text}': {_reason(exc)}") from None
        listing: dict[str, list[Any]] = {}
        for path, info in found.items():
            path = path.strip("/")
            if info.get("type") == "directory" or not path.startswith(root + "/"):
                continue
            rel = path[len(root) + 1 :]
            parts = rel.split("/")
            if not rel or any(p in ("", ".", "..") for p in parts) or rel == MANIFEST:
                continue  # a folder marker, or a key that would land outside the copy
            listing[rel] = [int(info.get("size") or 0), _tag(info)]
        return listing

    def _download(self, rel: str, target: Path) -> None:
        assert self._location is not None
        if target.is_dir():
            shutil.rmtree(target)
        target.parent.mkdir(parents=True, exist_ok=True)
        part = target.with_name(target.name + _PART)
        try:
            self._fs.get_file(f"{self._location.root}/{rel}", str(part))
            os.replace(part, target)
        except Exception as exc:  # noqa: BLE001 - each store raises its own errors
            with contextlib.suppress(OSError):
                part.unlink()
            raise RepositoryError(
                f"model repository '{self.text}': cannot copy '{rel}': {_reason(exc)}"
            ) from None

    def _prune(self, prefix: str, manifest: Listing) -> bool:
        """Remove the folders under ``prefix`` that hold no synced file any more (with what
        workers wrote in them, such as ``__pycache__``), so a model deleted from the store
        is gone from the copy too."""
        kept = {""}
        for rel in manifest:
            parts = rel.split("/")
            kept.update("/".join(parts[:i]) for i in range(1, len(parts)))
        start = self.local / prefix if prefix else self.local
        if not start.is_dir():
            return False
        removed = False
        for folder, dirs, _ in os.walk(start):
            rel_folder = os.path.relpath(folder, self.local).replace(os.sep, "/")
            rel_folder = "" if rel_folder == "." else rel_folder
            for name in list(dirs):
                rel = f"{rel_folder}/{name}" if rel_folder else name
                if rel not in kept:
                    shutil.rmtree(os.path.join(folder, name), ignore_errors=True)
                    dirs.remove(name)
                    removed = True
        if prefix and prefix not in kept:
            shutil.rmtree(start, ignore_errors=True)
            removed = True
        return removed

    def _load_manifest(self) -> Listing:
        if self._manifest is None:
            try:
                loaded = json.loads((self.local / MANIFEST).read_text())
                self._manifest = loaded if isinstance(loaded, dict) else {}
            except (OSError, ValueError):
                self._manifest = {}
        return self._manifest

    def _save_manifest(self, manifest: Listing) -> None:
        path = self.local / MANIFEST
        part = path.with_name(path.name + _PART)
        try:
            part.write_text(json.dumps(manifest, sort_keys=True))
            os.replace(part, path)
        except OSError:
            pass  # the next sync compares sizes again: at worst a file is fetched twice


def _within(rel: str, prefix: str) -> bool:
    return not prefix or rel == prefix or rel.startswith(prefix + "/")


def _has_size(path: Path, size: int) -> bool:
    try:
        return path.stat().st_size == size
    except OSError:
        return False


def _tag(info: dict[str, Any]) -> str:
    for key in _TAG_KEYS:
        if info.get(key) is not None:
            return str(info[key])
    return ""


def _reason(exc: BaseException) -> str:
    """The first line of what the store said, with its kind when it said nothing."""
    text = str(exc).strip().splitlines()
    return text[0] if text and text[0] else type(exc).__name__

