"""Public test helpers: run a real server process."""

from tritium.testing.server import ServerProcess

__all__ = ["ServerProcess"]
