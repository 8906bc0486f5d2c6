"""L6: composition root and server settings."""

from __future__ import annotations

from tritium.server.settings import Settings


def run(settings: Settings) -> int:
    """Run the server until SIGINT/SIGTERM (imported lazily so the CLI stays light)."""
    from tritium.server.app import run as _run

    return _run(settings)


__all__ = ["Settings", "run"]
