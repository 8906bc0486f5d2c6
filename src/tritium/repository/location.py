"""Where a ``--model-repository`` points: a local folder, checked before anything loads,
or a cloud store (``s3://``, ``gs://``, ``as://``) served from a local copy (``remote``).

Any other ``scheme://`` is refused by its scheme rather than taken for a relative path
(which ``pathlib`` would also mangle: ``s3:/bucket``).
"""

from __future__ import annotations

import os
import stat
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from tritium.repository.cloud_url import cloud_scheme
from tritium.repository.remote import RemoteRepository, copy_folder
from tritium.repository.scan import RepositoryError


def repository_roots(texts: Sequence[str]) -> tuple[list[Path], list[RemoteRepository]]:
    """The local folders to serve, one per location (a cloud location's is its copy's
    folder), and the cloud locations' copies, to sync before the folders are read."""
    schemes = Counter(cloud_scheme(t) for t in texts)
    roots, remotes = [], []
    for index, text in enumerate(texts):
        scheme = cloud_scheme(text)
        if scheme is None:
            roots.append(Path(text))
            continue
        local, owned = copy_folder(text, index, schemes[scheme])
        remotes.append(RemoteRepository(text, local, owned=owned))
        roots.append(local)
    return roots, remotes


def check_location(text: str) -> Path:
    """The local folder ``text`` names; RepositoryError (one line) when it cannot serve.
    Cloud locations are checked when their copy opens (``RemoteRepository.open``)."""
    scheme, sep, _ = text.partition("://")
    if sep:
        raise RepositoryError(
            f"model repository '{text}': '{scheme}://' locations are not supported; "
            "pass a local folder"
        )
    try:
        mode = os.stat(text).st_mode  # follows a symlink, as Triton's stat() does
    except FileNotFoundError:
        raise RepositoryError(f"model repository '{text}' does not exist") from None
    except OSError as exc:
        raise RepositoryError(
            f"model repository '{text}' cannot be read: {exc.strerror or type(exc).__name__}"
        ) from None
    if not stat.S_ISDIR(mode):
        raise RepositoryError(f"model repository '{text}' is not a directory")
    return Path(text)
