"""How one field of ``Settings`` is declared: its default, help text, help section and the
hints from which the command line (``tritium.cli.serve``) builds its flag."""

from __future__ import annotations

from dataclasses import field
from typing import Any


def opt(default: Any, help: str, group: str, *, secret: bool = False, **cli: Any) -> Any:
    """One setting: its default, its help text, its help section and any CLI hints.

    CLI hints (all optional): `aliases` (extra flag spellings), `choices`, `fold_case`
    (choices compared case-insensitively), `kind` ("switch": a flag without a value;
    "level": an integer that also accepts true/false), `metavar`, `int_bits` (64 for
    byte sizes; Triton parses other integers as 32-bit), `deprecated_alias` (an old
    boolean flag that sets this field, with Triton's deprecation warning). A `secret`
    value is left out of the settings' repr.
    """
    return field(default=default, repr=not secret, metadata={"help": help, "group": group, **cli})
