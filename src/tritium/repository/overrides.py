"""Model names and load overrides of the repository API, checked before anything is touched.

A load request may replace a model's configuration (``config``: a JSON model config) and
provide its files (``file:<version>/<name>``: bytes). As in Triton, given files make up the
whole model folder, so they are written, with the config, into a fresh private folder that
the server owns and removes once no loaded version uses it; the user's repository is never
written to. Every name and path is validated first, so a refused request changes nothing.
"""

from __future__ import annotations

import errno
import logging
import os
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from google.protobuf import text_format

from tritium.config import ModelConfig
from tritium.core.errors import InvalidArgument

log = logging.getLogger("tritium.repository")

FILE_PREFIX = "file:"
CONFIG_FILE = "config.pbtxt"
# The longest file name (one path component, in bytes) the usual Linux file systems accept
# (NAME_MAX); a longer one would only fail later, as an OS error, while the folder is written.
NAME_MAX = 255


def validate_model_name(name: str) -> None:
    """Refuse names that cannot be a model folder of the repository (Triton's texts)."""
    if not name:
        raise InvalidArgument("model name must not be empty")
    if not name.strip(" \t\n\v\f\r"):
        raise InvalidArgument("model name must not contain only whitespace characters")
    if ".." in name or "/" in name or "\\" in name or "\0" in name:
        raise InvalidArgument(
            f"invalid model name '{printable(name)}', model name must not contain path "
            "traversal characters"
        )


def override_file_path(key: str) -> PurePosixPath:
    """The relative path of a ``file:<path>`` parameter, refused unless it stays inside."""
    raw = key[len(FILE_PREFIX) :]
    parts = raw.split("/")
    bad = (
        not raw
        or "\0" in raw
        or "\\" in raw
        or raw.startswith("/")
        or any(part in ("", ".", "..") for part in parts)
    )
    if bad:
        raise InvalidArgument(
            f"Invalid file parameter '{printable(key)}' must stay within model directory."
        )
    for part in parts:
        if len(part.encode("utf-8", "surrogatepass")) > NAME_MAX:
            raise InvalidArgument(
                f"Invalid file parameter '{printable(key)}': a path component is longer "
                f"than {NAME_MAX} bytes"
            )
    return PurePosixPath(*parts)


@dataclass(frozen=True)
class LoadOverride:
    """What a load request replaces: the config (always, when files are given) and files."""

    config: ModelConfig | None = None
    files: dict[PurePosixPath, bytes] = field(default_factory=dict)


def check_file_layout(files: dict[PurePosixPath, bytes]) -> None:
    """Refuse a file whose folder is itself one of the files (``1`` and ``1/model.py``)."""
    for path in files:
        for parent in path.parents:
            if parent in files:
                raise InvalidArgument(
                    f"Invalid file parameter '{FILE_PREFIX}{path}', directory has been "
                    "created as a file"
                )


class PrivateFolder:
    """A server-owned model folder, removed when the last version using it lets go."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._users = 0

    def acquire(self) -> None:
        self._users += 1

    def release(self) -> None:
        self._users -= 1
        if self._users <= 0:
            self.remove()

    def remove(self) -> None:
        shutil.rmtree(self.path, ignore_errors=True)


def write_private_folder(name: str, override: LoadOverride) -> PrivateFolder:
    """Write ``override`` (config and files) into a fresh folder (blocking: run it off
    the event loop). The folder is removed again if anything fails."""
    path = Path(tempfile.mkdtemp(prefix=f"tritium-{_safe_prefix(name)}-"))
    try:
        root = path.resolve()
        config = override.config if override.config is not None else ModelConfig()
        (root / CONFIG_FILE).write_text(text_format.MessageToString(config))
        for relative, data in override.files.items():
            target = root.joinpath(*relative.parts)
            # The checks above make this impossible; this keeps it impossible.
            if not target.resolve().is_relative_to(root):
                raise InvalidArgument(
                    f"Invalid file parameter '{FILE_PREFIX}{relative}' must stay within "
                    "model directory."
                )
            target.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
            with os.fdopen(fd, "wb") as out:
                out.write(data)
    except OSError as exc:
        shutil.rmtree(path, ignore_errors=True)
        if exc.errno == errno.ENAMETOOLONG:
            # The whole path (private folder + the client's path) is too long: the client's
            # path is at fault, like any other bad file parameter, not the server.
            raise InvalidArgument(
                "Invalid file parameter: the path is too long for the server's file system"
            ) from None
        raise
    except BaseException:
        shutil.rmtree(path, ignore_errors=True)
        raise
    return PrivateFolder(path)


def _safe_prefix(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_" else "_" for c in name)[:32]


def printable(text: str) -> str:
    """``text`` with NUL characters written as ``\\0``, fit for a message."""
    return text.replace("\0", "\\0")
