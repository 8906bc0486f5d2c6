"""The `tritonserver` command: `tritium serve` under the name Triton's images and runtimes call.

Kubernetes manifests, KServe's Triton serving runtime and launch scripts run
`tritonserver --model-store=/mnt/models --grpc-port=9000 --http-port=8080 ...`. Installing
tritium (or its container image) puts this command on PATH, so those arguments reach
`tritium serve` unchanged: the flags, their value forms and their errors are exactly
`tritium serve`'s, only the program name in usage and error lines reads `tritonserver`.
"""

from __future__ import annotations

import sys
from collections.abc import Callable

from tritium.cli import serve
from tritium.server.settings import Settings

PROG = "tritonserver"


def main(argv: list[str] | None = None) -> int:
    """Run `tritonserver ARGV` (default: `sys.argv[1:]`) as `tritium serve`; returns the status.

    Usage errors and --help leave through `SystemExit`, as argparse does.
    """
    args = list(sys.argv[1:] if argv is None else argv)
    parser = serve.build_parser(prog=PROG)
    settings = serve.settings_from_namespace(parser.parse_args(args), parser)
    return _server_runner()(settings)


def _server_runner() -> Callable[[Settings], int]:
    # Imported on use: the server stack is heavy, and `--help` must not need it.
    from tritium.server import run

    return run
