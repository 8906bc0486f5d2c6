"""The Prometheus text format (version 0.0.4), written without I/O.

A page is a list of ``Family`` objects (name, help, type, samples); ``render`` turns it
into the bytes served on ``/metrics``. Label values and help texts are escaped as the
format requires, so a model name or a custom label holding quotes, backslashes or
newlines cannot break a line or forge another sample.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

Labels = tuple[tuple[str, str], ...]


@dataclass(slots=True)
class Family:
    name: str
    help: str
    type: str  # "counter" | "gauge" | "summary" | "histogram" | "untyped"
    # (name suffix such as "" / "_count" / "_bucket", labels, value)
    samples: list[tuple[str, Labels, float]] = field(default_factory=list)

    def add(self, labels: Labels, value: float, suffix: str = "") -> None:
        self.samples.append((suffix, labels, value))


def escape_label_value(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def escape_help(text: str) -> str:
    return text.replace("\\", "\\\\").replace("\n", "\\n")


def format_value(value: float) -> str:
    """Integers as integers (Triton's counters print ``156871``, not ``156871.0``)."""
    if isinstance(value, int):
        return str(value)
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if value.is_integer() and abs(value) < 2**53:
        return str(int(value))
    return repr(value)


def _labels(labels: Labels) -> str:
    if not labels:
        return ""
    inner = ",".join(f'{k}="{escape_label_value(v)}"' for k, v in labels)
    return "{" + inner + "}"


def render(families: list[Family]) -> bytes:
    """The whole page; families without samples still state their HELP and TYPE."""
    lines: list[str] = []
    for family in families:
        lines.append(f"# HELP {family.name} {escape_help(family.help)}")
        lines.append(f"# TYPE {family.name} {family.type}")
        for suffix, labels, value in family.samples:
            lines.append(f"{family.name}{suffix}{_labels(labels)} {format_value(value)}")
    lines.append("")
    return "\n".join(lines).encode()
