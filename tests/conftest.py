"""Shared fixtures: one real ``tritium serve`` process over the test and example repositories."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from tritium.testing import ServerProcess

ROOT = Path(__file__).resolve().parent.parent
TEST_MODELS = ROOT / "tests" / "models"
EXAMPLE_MODELS = ROOT / "examples" / "model_repository"


def _terminated(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


# A run stopped with SIGTERM (a CI timeout) still tears its fixtures down, so the servers it
# started (each in a session of its own, with their workers) do not outlive it.
if signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
    signal.signal(signal.SIGTERM, _terminated)


@pytest.fixture(scope="session")
def server():
    """A server over tests/models and examples/model_repository (both roots)."""
    with ServerProcess([TEST_MODELS, EXAMPLE_MODELS], ["--exit-on-error=false"]) as proc:
        yield proc


@pytest.fixture(scope="session")
def http_client(server):
    import tritonclient.http as httpclient

    client = httpclient.InferenceServerClient(server.http_url, concurrency=4)
    yield client
    client.close()
