"""`tritonserver` flags that have no `Settings` field, and what `tritium serve` does with them.

Launch scripts written for Triton often pass flags about GPUs, C++ thread pools or
shared-library folders. They mean nothing to tritium, so they are accepted and dropped
with a note, and the script keeps working. Flags for features tritium lacks (host
policies, header forwarding, ...) are refused by name instead: ignoring them would
silently change what the deployment asked for.

A flag that only switches such a feature off (``--allow-sagemaker=false``,
``--model-namespacing=false``) asks for what tritium does anyway, so it is accepted with every value
that means off; Triton's old trace flags (``--trace-file``, ``--trace-level``, ...) are
read as the ``--trace-config`` settings that replaced them.
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
    "--host-policy",
    "--sagemaker-port",
    "--sagemaker-safe-port-range",
    "--sagemaker-thread-count",
    "--vertex-ai-port",
    "--vertex-ai-thread-count",
    "--vertex-ai-default-model",
)

_BOOL_OFF = frozenset({"false", "off", "0"})

# flag -> (the values that mean off, what tritium does not provide)
OFF_ONLY_FLAGS: dict[str, tuple[frozenset[str], str]] = {
    "--allow-sagemaker": (_BOOL_OFF, "the SageMaker endpoint"),
    "--allow-vertex-ai": (_BOOL_OFF, "the Vertex AI endpoint"),
    "--model-namespacing": (_BOOL_OFF, "model namespacing"),
}

# Triton's trace flags before --trace-config -> the --trace-config setting each one is.
OLD_TRACE_FLAGS: dict[str, str] = {
    "--trace-file": "triton,file={}",
    "--trace-level": "level={}",
    "--trace-rate": "rate={}",
    "--trace-count": "count={}",
    "--trace-log-frequency": "triton,log-frequency={}",
}

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


class _OffOnlyFlag(argparse.Action):
    """Accepts the values that switch the feature off; refuses any other, naming it."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: str | Sequence[Any] | None,
        option_string: str | None = None,
    ) -> None:
        flag = self.option_strings[0]
        off, feature = OFF_ONLY_FLAGS[flag]
        if isinstance(values, str) and values.lower() in off:
            return
        given = f"{flag}={values}" if isinstance(values, str) else flag
        parser.error(
            f"{given}: tritium does not provide {feature}; only "
            f"{flag}={'false' if 'false' in off else 'off'} (switching it off) is accepted"
        )


class _OldTraceFlag(argparse.Action):
    """Triton's pre-``--trace-config`` flag, read as the setting it became (with a note)."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: str | Sequence[Any] | None,
        option_string: str | None = None,
    ) -> None:
        flag = self.option_strings[0]
        setting = OLD_TRACE_FLAGS[flag].format(values)
        entries = list(getattr(namespace, "trace_config", []))
        entries.append(setting)
        namespace.trace_config = entries
        notes = list(getattr(namespace, NOTES_DEST, []))
        notes.append(f"note: {flag} is deprecated in Triton; read as --trace-config {setting}")
        setattr(namespace, NOTES_DEST, notes)


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
    off_group = parser.add_argument_group(
        "Accepted for tritonserver compatibility when they switch a feature off",
    )
    for flag, (off, feature) in OFF_ONLY_FLAGS.items():
        off_group.add_argument(
            flag,
            action=_OffOnlyFlag,
            nargs="?",
            metavar="<value>",
            dest=NOTES_DEST,
            default=argparse.SUPPRESS,
            help=f"Accepted as {'/'.join(sorted(off))}: tritium does not provide {feature}.",
        )
    for flag, setting in OLD_TRACE_FLAGS.items():
        off_group.add_argument(
            flag,
            action=_OldTraceFlag,
            metavar="<value>",
            dest=NOTES_DEST,
            default=argparse.SUPPRESS,
            help=f"Triton's old trace flag: the same as --trace-config {setting.format('<value>')}.",
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
