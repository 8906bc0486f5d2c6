"""gRPC endpoints for the e2e suite: one real server per transport, the same tests for each.

``grpc_impl`` is parametrized over the transports ``--grpc-implementation`` selects; a
transport whose module is not installed is skipped with the reason. ``grpc_server`` is
one server per test module and transport; ``grpc_launch`` starts extra servers with their
own flags (TLS, compression) for the current transport.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import pytest

from tritium.testing import ServerProcess

ROOT = Path(__file__).resolve().parents[2]
TEST_MODELS = ROOT / "tests" / "models"
EXAMPLE_MODELS = ROOT / "examples" / "model_repository"

#: Transport name → the module that must be importable for it to be tested.
GRPC_IMPLEMENTATIONS = {
    "grpcio": "tritium.frontends.grpc.server",
    "native": "tritium.frontends.grpc.native",
}

#: Only models that load, so the server is ready (grpc.health answers SERVING).
GRPC_MODELS = (
    "add_sub",
    "identity",
    "string_upper",
    "echo_all",
    "faulty",
    "sleeper",
    "cancellable",
    "versioned_all",
    "reshape",
    "batch_merge",
)


def grpc_server_args(implementation: str, extra_args: Sequence[str] = ()) -> list[str]:
    """Command-line flags for a gRPC test server using ``implementation``."""
    return [
        f"--grpc-implementation={implementation}",
        "--model-control-mode=explicit",
        *(f"--load-model={name}" for name in GRPC_MODELS),
        *extra_args,
    ]


@pytest.fixture(scope="module", params=sorted(GRPC_IMPLEMENTATIONS))
def grpc_impl(request: pytest.FixtureRequest) -> str:
    """The gRPC transport under test; skipped when its module is not present."""
    module = GRPC_IMPLEMENTATIONS[request.param]
    if importlib.util.find_spec(module) is None:
        pytest.skip(f"--grpc-implementation={request.param} is not available ({module} is absent)")
    return request.param


@pytest.fixture
def known_gap(grpc_impl: str, request: pytest.FixtureRequest) -> Callable[[str, str], None]:
    """``known_gap(impl, reason)``: this test is a strict xfail on transport ``impl``."""

    def mark(implementation: str, reason: str) -> None:
        if grpc_impl == implementation:
            request.applymarker(pytest.mark.xfail(strict=True, reason=reason))

    return mark


@pytest.fixture(scope="module")
def grpc_launch(grpc_impl: str) -> Callable[..., ServerProcess]:
    """``grpc_launch(extra_args)`` → an unstarted server process on the current transport."""

    def launch(extra_args: Sequence[str] = ()) -> ServerProcess:
        return ServerProcess(
            [TEST_MODELS, EXAMPLE_MODELS], grpc_server_args(grpc_impl, extra_args), grpc=True
        )

    return launch


@pytest.fixture(scope="module")
def grpc_server(grpc_launch: Callable[..., ServerProcess]) -> Iterator[ServerProcess]:
    """A server with HTTP and gRPC over the test and example models, one per module."""
    with grpc_launch() as server:
        assert server.grpc_port is not None, server.log[-3000:]
        yield server
