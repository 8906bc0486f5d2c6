"""Reading members of a v2 infer request's JSON with Triton's error texts for a member
that is missing or of the wrong kind."""

from __future__ import annotations

from tritium.core.errors import InvalidArgument

_INT64_MAX = 2**63 - 1
_U_INT64_MAX = 2**64 - 1


def not_member(key: str, what: str = "") -> InvalidArgument:
    return InvalidArgument(
        f"Unable to parse '{key}': attempt to access non-existing object member '{key}'{what}"
    )


def wrong_kind(key: str, kind: str, prefix: str = "Unable to parse") -> InvalidArgument:
    return InvalidArgument(f"{prefix} '{key}': attempt to access JSON {kind}")


NOT_STR = "non-string as string"
NOT_ARRAY = "non-array as array"
NOT_OBJECT = "non-object as object"
NOT_UINT = "non-unsigned-integer as unsigned-integer"
NOT_BOOL = "non-boolean as boolean"


def is_uint(v: object) -> bool:
    return type(v) is int and 0 <= v <= _U_INT64_MAX


def get_str(obj: dict, key: str) -> str:
    v = obj.get(key)
    if type(v) is str:
        return v
    raise not_member(key) if key not in obj else wrong_kind(key, NOT_STR)


def shape_of(inp: dict, name: str) -> tuple[tuple[int, ...], int]:
    """The input's shape and element count (exact: Python ints never overflow)."""
    if "shape" not in inp:
        raise not_member("shape")
    dims = inp["shape"]
    if type(dims) is not list:
        raise wrong_kind("shape", NOT_ARRAY)
    count = 1
    for d in dims:
        if type(d) is not int or d < 0 or d > _INT64_MAX:
            raise InvalidArgument(
                f"Unable to parse 'shape': attempt to access JSON {NOT_UINT} for input '{name}'"
            )
        count *= d
    return tuple(dims), count
