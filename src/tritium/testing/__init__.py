"""Public test helpers: a real server process, fake runners for scheduler tests."""

from tritium.testing.fakes import FakeRunner, FakeTransport
from tritium.testing.server import ServerProcess

__all__ = ["FakeRunner", "FakeTransport", "ServerProcess"]
