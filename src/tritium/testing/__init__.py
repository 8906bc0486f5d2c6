"""Public test helpers: a real server process, fake runners, a fake clock for scheduler tests."""

from tritium.testing.clock import FakeClock
from tritium.testing.fakes import FakeRunner, FakeTransport
from tritium.testing.server import ServerProcess

__all__ = ["FakeClock", "FakeRunner", "FakeTransport", "ServerProcess"]
