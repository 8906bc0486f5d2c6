"""Locate (and install if missing) the reference tools: real Triton, perf_analyzer and wrk.

The scripts that install and run them live outside the repository, in the shared tools folder
(`${TRITIUM_SHARED_TOOLS:-../shared/tools}` relative to the repository root); the bench only
calls them, so that anyone with the same public packages reproduces the same setup.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_ANCHORS = Path("/tmp/anchors")
SETUP_TIMEOUT_S = 1800.0


class BenchSetupError(RuntimeError):
    """The benchmark cannot run on this machine (missing tools, busy ports, ...)."""


@dataclass(frozen=True)
class Anchors:
    """Paths of the reference tools used by one benchmark run."""

    tools_dir: Path
    prefix: Path
    perf_analyzer: Path
    start_triton: Path
    stop_server: Path
    wrk: Path | None

    @property
    def tritonserver(self) -> Path:
        return self.prefix / "bin" / "tritonserver"


def default_tools_dir() -> Path:
    """`$TRITIUM_SHARED_TOOLS`, else `../shared/tools` next to the repository root."""
    env = os.environ.get("TRITIUM_SHARED_TOOLS")
    path = Path(env) if env else REPO_ROOT.parent / "shared" / "tools"
    return path if path.is_absolute() else (REPO_ROOT / path)


def default_prefix() -> Path:
    """`$ANCHORS` (the prefix setup-anchors.sh installs into), else /tmp/anchors."""
    return Path(os.environ.get("ANCHORS") or DEFAULT_ANCHORS)


def add_server_options(parser: argparse.ArgumentParser) -> None:
    """The options every paired run shares: where the reference tools are, the servers'
    ports, and extra flags for ``tritium serve``."""
    parser.add_argument(
        "--tools-dir",
        type=Path,
        default=default_tools_dir(),
        help="shared tools folder with setup-anchors.sh (default $TRITIUM_SHARED_TOOLS or ../shared/tools)",
    )
    parser.add_argument(
        "--anchors",
        type=Path,
        default=default_prefix(),
        help="prefix the reference servers are installed in (default $ANCHORS or /tmp/anchors)",
    )
    parser.add_argument("--triton-ports", default="18000,18001,18002", help="HTTP,GRPC,METRICS")
    parser.add_argument("--tritium-port", type=int, default=18100)
    parser.add_argument(
        "--tritium-arg",
        action="append",
        default=[],
        metavar="FLAG",
        help="extra flag for tritium serve, repeatable (e.g. --tritium-arg=--grpc-implementation=grpcio)",
    )


def locate_anchors(tools_dir: Path, prefix: Path, *, install: bool = True) -> Anchors:
    """Check the tools folder and the installed anchors; run setup-anchors.sh when needed."""
    tools_dir = tools_dir.resolve()
    scripts = {
        name: tools_dir / name for name in ("setup-anchors.sh", "start-triton.sh", "stop-server.sh")
    }
    missing = [str(p) for p in scripts.values() if not p.is_file()]
    if missing:
        raise BenchSetupError(
            f"shared tools folder {tools_dir} is missing {', '.join(missing)}; point "
            "TRITIUM_SHARED_TOOLS (or --tools-dir) at the folder holding setup-anchors.sh, "
            "start-triton.sh and stop-server.sh"
        )
    prefix = prefix.resolve()
    perf_analyzer = prefix / "bin" / "perf_analyzer"
    if not _installed(prefix):
        if not install:
            raise BenchSetupError(
                f"{perf_analyzer} not found; run ANCHORS={prefix} {scripts['setup-anchors.sh']}"
            )
        _run_setup(scripts["setup-anchors.sh"], prefix)
        if not _installed(prefix):
            raise BenchSetupError(
                f"{scripts['setup-anchors.sh']} finished but {perf_analyzer} or "
                f"{prefix / 'bin' / 'tritonserver'} is still missing"
            )
    wrk = shutil.which("wrk")
    return Anchors(
        tools_dir=tools_dir,
        prefix=prefix,
        perf_analyzer=perf_analyzer,
        start_triton=scripts["start-triton.sh"],
        stop_server=scripts["stop-server.sh"],
        wrk=Path(wrk) if wrk else None,
    )


def _installed(prefix: Path) -> bool:
    return all(os.access(prefix / "bin" / b, os.X_OK) for b in ("perf_analyzer", "tritonserver"))


def _run_setup(script: Path, prefix: Path) -> None:
    print(f"[bench] installing reference servers: ANCHORS={prefix} {script} (a few minutes)")
    env = {**os.environ, "ANCHORS": str(prefix)}
    try:
        subprocess.run(["bash", str(script)], env=env, check=True, timeout=SETUP_TIMEOUT_S)
    except (subprocess.CalledProcessError, subprocess.TimeoutExpired) as exc:
        raise BenchSetupError(f"{script} failed: {exc}") from exc
