"""Public test helpers: a real server process, fake runners, a fake clock for scheduler tests."""

from tritium.testing.clock import FakeClock
from tritium.testing.fakes import FakeRunner, FakeTransport
from tritium.testing.server import ServerProcess
from tritium.testing.signals import exit_on_signals

__all__ = ["FakeClock", "FakeRunner", "FakeTransport", "ServerProcess", "exit_on_signals"]
