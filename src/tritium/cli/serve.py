"""The `tritium serve` command line, generated from the fields of `Settings`.

Every field becomes `--<field-name-with-dashes>`; its type decides how the value is
parsed (bool, int, str, repeatable tuple) and its metadata supplies help text, aliases,
choices and the few special cases. Argparse defaults are suppressed so that the
namespace holds only what the user typed; `Settings` supplies the defaults, and so is
the single place they are written.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import types
import typing
from collections.abc import Callable
from typing import Any

from tritium.cli.triton_compat import add_compat_flags, print_notes
from tritium.cli.values import integer_parser, parse_backend_config, parse_bool, parse_level
from tritium.server.settings import Settings

DESCRIPTION = (
    "Serve Triton Python-backend model repositories over the KServe v2 HTTP and gRPC "
    "protocols. Flags are tritonserver's: boolean flags take true/false, on/off or 1/0 "
    "(a bare boolean flag means true); repeatable flags may be given several times."
)
EPILOG = (
    "tritonserver flags for features tritium does not provide (host policies, "
    "SageMaker and Vertex AI endpoints, ...) are refused "
    "with an error rather than ignored."
)

_DEPRECATED_PREFIX = "_deprecated_"
_DEPRECATION_WARNING = "Warning: '{alias}' has been deprecated! Please use '{flag}' instead."
_DEPRECATION_OVERRIDE = (
    "Warning: Overriding deprecated '{alias}' from False to True in favor of '{flag}'!"
)


def flag_name(field: dataclasses.Field[Any]) -> str:
    """The command-line spelling of a settings field: `http_port` -> `--http-port`."""
    return "--" + field.name.replace("_", "-")


def configure_parser(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Add one option per `Settings` field (grouped as in Triton's help) to `parser`."""
    parser.usage = "%(prog)s [options]"  # the full list is in --help, as in tritonserver
    parser.description = DESCRIPTION
    parser.epilog = EPILOG
    hints = typing.get_type_hints(Settings)
    groups: dict[str, argparse._ArgumentGroup] = {}
    for field in dataclasses.fields(Settings):
        meta = field.metadata
        group_name = meta.get("group", "Server")
        if group_name not in groups:
            groups[group_name] = parser.add_argument_group(group_name)
        group = groups[group_name]
        flags = [flag_name(field), *meta.get("aliases", ())]
        group.add_argument(
            *flags,
            dest=field.name,
            default=argparse.SUPPRESS,
            help=_help_text(field),
            **_argument_kwargs(field, hints[field.name]),
        )
        alias = meta.get("deprecated_alias")
        if alias:
            group.add_argument(
                alias,
                dest=_DEPRECATED_PREFIX + field.name,
                default=argparse.SUPPRESS,
                type=parse_bool,
                metavar="<boolean>",
                help=f"DEPRECATED: use {flag_name(field)} instead; true means the same.",
            )
    add_compat_flags(parser)
    return parser


def build_parser(prog: str = "tritium serve") -> argparse.ArgumentParser:
    """A standalone `serve` parser (the `tritium` command embeds the same options)."""
    return configure_parser(argparse.ArgumentParser(prog=prog))


def settings_from_namespace(
    namespace: argparse.Namespace, parser: argparse.ArgumentParser
) -> Settings:
    """Build `Settings` from what was parsed; invalid values end in `parser.error` (exit 2)."""
    given = vars(namespace)
    values = {f.name: given[f.name] for f in dataclasses.fields(Settings) if f.name in given}
    for field in dataclasses.fields(Settings):
        alias = field.metadata.get("deprecated_alias")
        key = _DEPRECATED_PREFIX + field.name
        if alias and key in given:
            _apply_deprecated_alias(values, field, alias, given[key])
    print_notes(namespace, parser.prog)
    try:
        return Settings(**values)
    except ValueError as exc:
        parser.error(str(exc))


def parse_settings(argv: list[str], prog: str = "tritium serve") -> Settings:
    """Parse `tritium serve` arguments (without the subcommand) into `Settings`."""
    parser = build_parser(prog)
    return settings_from_namespace(parser.parse_args(argv), parser)


def _apply_deprecated_alias(
    values: dict[str, Any], field: dataclasses.Field[Any], alias: str, alias_value: bool
) -> None:
    # Triton: the old flag warns; when the new switch is also given it wins.
    flag = flag_name(field)
    print(_DEPRECATION_WARNING.format(alias=alias, flag=flag), file=sys.stderr)
    if field.name in values:
        if values[field.name] and not alias_value:
            print(_DEPRECATION_OVERRIDE.format(alias=alias, flag=flag), file=sys.stderr)
        return
    values[field.name] = alias_value


def _argument_kwargs(field: dataclasses.Field[Any], hint: Any) -> dict[str, Any]:
    """argparse keyword arguments for one field, chosen from its type and metadata."""
    meta = field.metadata
    kind = meta.get("kind")
    base = _strip_optional(hint)
    if kind == "switch":
        return {"action": "store_const", "const": True}
    if kind == "level":
        return {"type": parse_level, "metavar": "<integer>"}
    if base is bool:
        # A bare boolean flag means true; Triton itself insists on a value.
        return {"type": parse_bool, "nargs": "?", "const": True, "metavar": "<boolean>"}
    if base is int:
        return {"type": integer_parser(meta.get("int_bits", 32)), "metavar": "<integer>"}
    if typing.get_origin(base) is tuple:
        item = typing.get_args(base)[0]
        parse: Callable[[str], Any] = str if item is str else parse_backend_config
        return {"type": parse, "action": "append", "metavar": meta.get("metavar", "<string>")}
    if base is str:
        kwargs: dict[str, Any] = {"metavar": meta.get("metavar", "<string>")}
        choices = meta.get("choices")
        if choices:
            kwargs["choices"] = choices
            kwargs["metavar"] = "{" + ",".join(choices) + "}"
            if meta.get("fold_case"):
                kwargs["type"] = str.lower
        return kwargs
    raise TypeError(f"no command-line form for settings field {field.name}: {hint!r}")


def _strip_optional(hint: Any) -> Any:
    """`int | None` -> `int`: an unset optional setting is simply not given."""
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        if len(args) == 1:
            return args[0]
    return hint


def _help_text(field: dataclasses.Field[Any]) -> str:
    text = field.metadata.get("help", "")
    default = field.default
    if isinstance(default, tuple):
        suffix = " (repeatable)"
    elif default is None or default == "":
        suffix = ""
    elif isinstance(default, bool):
        suffix = f" (default: {str(default).lower()})"
    else:
        suffix = f" (default: {default})"
    # argparse expands %-formatting in help strings.
    return (text + suffix).replace("%", "%%")
