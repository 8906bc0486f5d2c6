"""`tritonserver` flags that have no `Settings` field, and what `tritium serve` does with them.

Launch scripts written for Triton often pass flags about GPUs, C++ thread pools or
shared-library folders. They mean nothing to tritium, so they are accepted and dropped
with a note, and the script keeps working. Flags for features tritium lacks (rate
limiting, ...) are refused by name instead: ignoring them would silently change what the
deployment asked for.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any

# flag -> why it has no effect here
IGNORED_FLAGS: dict[str, str] = {
    "--http-thread-count": "requests are served by one event loop, not a thread pool",
    "--backend-directory": "the Python backend is built in",
    "--repoagent-directory": "repository agents are not loaded",
    "--buffer-manager-thread-count": "tensors are not copied by a thread pool",
    "--grpc-infer-allocation-pool-size": "request objects are not pooled",
    "--enable-peer-access": "tritium does not manage GPUs",
    "--pinned-memory-pool-byte-size": "tritium does not manage pinned memory",
    "--cuda-memory-pool-byte-size": "tritium does not manage CUDA memory",
    "--cuda-virtual-address-size": "tritium does not manage CUDA memory",
    "--min-supported-compute-capability": "tritium does not manage GPUs",
    "--model-load-gpu-limit": "tritium does not manage GPUs",
}

UNSUPPORTED_FLAGS: tuple[str, ...] = (
    "--http-header-forward-pattern",
    "--grpc-header-forward-pattern",
    "--model-namespacing",
    "--trace-file",
    "--trace-level",
    "--trace-rate",
    "--trace-count",
    "--trace-log-frequency",
    "--rate-limit",
    "--rate-limit-resource",
    "--host-policy",
    "--allow-sagemaker",
    "--sagemaker-port",
    "--sagemaker-safe-port-range",
    "--sagemaker-thread-count",
    "--allow-vertex-ai",
    "--vertex-ai-port",
    "--vertex-ai-thread-count",
    "--vertex-ai-default-model",
)

NOTES_DEST = "_compat_notes"


class _IgnoredFlag(argparse.Action):
    """Consumes the flag's value and records a note instead of setting anything."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: str | Sequence[Any] | None,
        option_string: str | None = None,
    ) -> None:
        flag = self.option_strings[0]
        notes = list(getattr(namespace, NOTES_DEST, []))
        notes.append(f"note: {flag} has no effect in tritium ({IGNORED_FLAGS[flag]}); ignored")
        setattr(namespace, NOTES_DEST, notes)


class _UnsupportedFlag(argparse.Action):
    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: str | Sequence[Any] | None,
        option_string: str | None = None,
    ) -> None:
        parser.error(
            f"{self.option_strings[0]} is a tritonserver flag that tritium does not support"
        )


def add_compat_flags(parser: argparse.ArgumentParser) -> None:
    """Register the ignored flags (listed in --help) and the refused ones (hidden)."""
    group = parser.add_argument_group(
        "Accepted for tritonserver compatibility (no effect)",
    )
    for flag, reason in IGNORED_FLAGS.items():
        group.add_argument(
            flag,
            action=_IgnoredFlag,
            metavar="<value>",
            dest=NOTES_DEST,
            default=argparse.SUPPRESS,
            help=f"Ignored: {reason}.",
        )
    for flag in UNSUPPORTED_FLAGS:
        # nargs="?" so both --flag=value and a bare --flag reach the clear error.
        parser.add_argument(
            flag,
            action=_UnsupportedFlag,
            nargs="?",
            dest=NOTES_DEST,
            default=argparse.SUPPRESS,
            help=argparse.SUPPRESS,
        )


def print_notes(namespace: argparse.Namespace, prog: str) -> None:
    for note in getattr(namespace, NOTES_DEST, []):
        print(f"{prog}: {note}", file=sys.stderr)
