"""Where a ``--model-repository`` points: a local folder, checked before anything loads.

Triton also reads repositories from object stores (``s3://``, ``gs://``, ``as://``).
tritium serves local folders only, so such a location is refused by its scheme rather
than taken for a relative path (which ``pathlib`` would also mangle: ``s3:/bucket``).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from tritium.repository.scan import RepositoryError

# Triton's cloud repository schemes, with the store each one names.
CLOUD_SCHEMES: dict[str, str] = {
    "s3": "Amazon S3",
    "gs": "Google Cloud Storage",
    "as": "Azure Storage",
}


def check_location(text: str) -> Path:
    """The local folder ``text`` names; RepositoryError (one line) when it cannot serve."""
    scheme, sep, _ = text.partition("://")
    if sep and scheme.lower() in CLOUD_SCHEMES:
        raise RepositoryError(
            f"model repository '{text}': cloud model repositories ({scheme}://, "
            f"{CLOUD_SCHEMES[scheme.lower()]}) are not supported yet; copy the models "
            "to a local folder and pass that folder"
        )
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
