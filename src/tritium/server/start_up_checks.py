"""What start-up checks before anything loads or listens, and how a failed bind reads.

Each failure becomes one clear line (an ``OSError`` or ``RepositoryError`` message) that
the server logs before it exits with status 1: no traceback for a user's mistake.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Iterator
from contextlib import contextmanager

from tritium.repository.cloud_url import cloud_scheme
from tritium.repository.location import check_location
from tritium.server.settings import Settings


def check_start_up(s: Settings) -> None:
    """The files the endpoints need are readable and every local repository is a folder
    (a cloud repository is checked when its copy is first synced)."""
    _check_readable_files(s)
    for location in s.model_repository:
        if cloud_scheme(location) is None:
            check_location(location)


@contextmanager
def binding(service: str, host: str, port: int, flag: str) -> Iterator[None]:
    """Name the endpoint and its flag when it cannot listen (Triton: "failed to start
    HTTP service: ... already in use"), instead of the socket's bare error."""
    try:
        yield
    except OSError as exc:
        if exc.errno not in (None, errno.EADDRINUSE, errno.EADDRNOTAVAIL, errno.EACCES):
            raise
        # grpcio says only "Failed to bind": no errno to tell in-use from not-available.
        why = os.strerror(exc.errno).lower() if exc.errno else "address in use or not available"
        raise OSError(
            f"failed to start {service} service: cannot bind {host}:{port} ({flag}): {why}",
        ) from None


def _check_readable_files(s: Settings) -> None:
    """Fail before loading any model when a file the endpoints need cannot be read."""
    if not (s.allow_grpc and s.grpc_use_ssl):
        return
    files = [("--grpc-server-cert", s.grpc_server_cert), ("--grpc-server-key", s.grpc_server_key)]
    if s.grpc_use_ssl_mutual:
        files.append(("--grpc-root-cert", s.grpc_root_cert))
    for flag, path in files:
        try:
            with open(path, "rb"):
                pass
        except OSError as exc:
            raise OSError(f"cannot read {flag} file '{path}': {exc.strerror}") from None
