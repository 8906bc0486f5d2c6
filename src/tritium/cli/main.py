"""The `tritium` command: parse the command line and hand off to the chosen subcommand.

`tritium serve FLAGS` starts the server. Like `tritonserver`, which takes its flags
directly, `tritium FLAGS` (flags without a subcommand) means `tritium serve FLAGS`.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable

from tritium import __version__
from tritium.cli import serve
from tritium.server.settings import Settings

_TOP_LEVEL_FLAGS = frozenset({"-h", "--help", "--version"})


def build_parser() -> tuple[argparse.ArgumentParser, dict[str, argparse.ArgumentParser]]:
    """The `tritium` parser and its subcommand parsers, by name."""
    parser = argparse.ArgumentParser(
        prog="tritium",
        description="A Triton-compatible inference server for Python-backend models.",
        epilog="`tritium --model-repository=DIR ...` is short for `tritium serve ...`.",
    )
    parser.add_argument("--version", action="version", version=f"tritium {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    serve_parser = commands.add_parser(
        "serve",
        help="serve model repositories (accepts tritonserver's flags)",
    )
    serve.configure_parser(serve_parser)
    return parser, {"serve": serve_parser}


def main(argv: list[str] | None = None) -> int:
    """Run `tritium` with `argv` (default: `sys.argv[1:]`); returns the exit status.

    Usage errors and --help/--version leave through `SystemExit`, as argparse does
    (status 2 for errors, 0 for help and version).
    """
    args = list(sys.argv[1:] if argv is None else argv)
    if args and args[0].startswith("-") and args[0] not in _TOP_LEVEL_FLAGS:
        args.insert(0, "serve")
    parser, subparsers = build_parser()
    if args and args[0] in subparsers:
        # Parsed by the subcommand's own parser, so errors show its usage, not ours.
        serve_parser = subparsers[args[0]]
        settings = serve.settings_from_namespace(serve_parser.parse_args(args[1:]), serve_parser)
        return _server_runner()(settings)
    parser.parse_args(args)  # --help, --version, or an error naming the bad command
    parser.error("a command is required (or tritonserver flags, e.g. --model-repository)")


def _server_runner() -> Callable[[Settings], int]:
    # Imported on use: the server stack is heavy, and `--help` must not need it.
    from tritium.server import run

    return run
