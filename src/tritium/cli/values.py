"""Parsers for flag values, as strict as `tritonserver`'s and with its error texts.

Each function takes the raw text after `--flag=` and returns the typed value, or raises
`argparse.ArgumentTypeError`, which argparse reports as `argument --flag: <message>`.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Callable

_TRUE = frozenset({"true", "on", "1"})
_FALSE = frozenset({"false", "off", "0"})
# Digits only: Python's int() would also take "1_000" and " 1", which Triton rejects.
_INTEGER = re.compile(r"[+-]?[0-9]+")


def parse_bool(text: str) -> bool:
    """true/on/1 or false/off/0, any case; anything else (even yes/no) is an error."""
    lowered = text.lower()
    if lowered in _TRUE:
        return True
    if lowered in _FALSE:
        return False
    raise argparse.ArgumentTypeError(f"invalid value for bool option: {text}")


def integer_parser(bits: int = 32) -> Callable[[str], int]:
    """A parser for signed integers that must fit in `bits` bits, like Triton's."""
    low, high = -(2 ** (bits - 1)), 2 ** (bits - 1) - 1

    def parse_int(text: str) -> int:
        if not _INTEGER.fullmatch(text):
            raise argparse.ArgumentTypeError(f"Invalid option value. Got {text}")
        value = int(text)
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"Provided option value is out of bound. Got {text}")
        return value

    return parse_int


parse_int = integer_parser(32)


def parse_level(text: str) -> int:
    """An integer level, where true/false also mean 1/0 (Triton's --log-verbose)."""
    lowered = text.lower()
    if lowered == "true":
        return 1
    if lowered == "false":
        return 0
    return parse_int(text)


def parse_backend_config(text: str) -> tuple[str, str, str]:
    """`<backend>,<setting>=<value>`, or `<setting>=<value>` for every backend.

    Returns (backend, setting, value) with backend "" for the global form. Only the
    first "," before the first "=" separates the backend name, so values may hold
    commas and "=" signs.
    """
    setting_part, eq, value = text.partition("=")
    backend, comma, setting = setting_part.partition(",")
    if not comma:
        backend, setting = "", setting_part
    elif not backend:
        raise argparse.ArgumentTypeError(
            "No backend specified. --backend-config option format is "
            f"<backend name>,<setting>=<value> or <setting>=<value>. Got {text}"
        )
    if not eq or not setting or not value:
        raise argparse.ArgumentTypeError(
            f"--backend-config option format is '<backend name>,<setting>=<value>'. Got {text}"
        )
    return backend, setting, value
