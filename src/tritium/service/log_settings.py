"""Triton's logging extension: read and change the log settings at run time.

``GET /v2/logging`` and gRPC ``LogSettings`` read the settings; a POST (or a gRPC request
with settings) changes the levels and the format. ``log_file`` is fixed at start-up and
refused over the network. Status codes and texts are Triton's, quirks included (a
wrongly typed value is a 500, an unknown format a 503); keys Triton does not know are
ignored. Every accepted change is applied to the server's own log and passed to each
listener (the running workers).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tritium.core.errors import InternalError, Unavailable, Unsupported
from tritium.core.log_lines import DEFAULT, ISO8601

_BOOLS = ("log_info", "log_warning", "log_error")
_UINT32_MAX = 2**32 - 1


class LogSettings:
    def __init__(
        self,
        *,
        log_file: str = "",
        info: bool = True,
        warning: bool = True,
        error: bool = True,
        verbose: int = 0,
        fmt: str = DEFAULT,
    ) -> None:
        self.values: dict[str, Any] = {
            "log_file": log_file,
            "log_info": info,
            "log_warning": warning,
            "log_error": error,
            "log_verbose_level": verbose,
            "log_format": fmt,
        }
        self._listeners: list[Callable[[dict[str, Any]], None]] = []

    def on_change(self, listener: Callable[[dict[str, Any]], None]) -> None:
        """``listener(changed)`` runs after every accepted update, with the keys changed."""
        self._listeners.append(listener)

    def as_json(self) -> dict[str, Any]:
        return dict(self.values)

    def update(self, doc: object) -> dict[str, Any]:
        """Apply the settings in ``doc`` (all or nothing); returns every setting."""
        if not isinstance(doc, dict):
            return self.as_json()  # Triton answers a non-object body with the settings
        changed: dict[str, Any] = {}
        if "log_file" in doc:
            raise Unsupported("log file location can not be updated through network protocol")
        for key in _BOOLS:
            if key in doc:
                if type(doc[key]) is not bool:
                    raise InternalError("attempt to access JSON non-boolean as boolean")
                changed[key] = doc[key]
        if "log_verbose_level" in doc:
            level = doc["log_verbose_level"]
            if type(level) is not int or not 0 <= level <= _UINT32_MAX:
                raise InternalError(
                    "attempt to access JSON non-unsigned-integer as unsigned-integer"
                )
            changed["log_verbose_level"] = level
        if "log_format" in doc:
            fmt = doc["log_format"]
            if type(fmt) is not str:
                raise InternalError("attempt to access JSON non-string as string")
            if fmt not in (DEFAULT, ISO8601):
                raise Unavailable(f"invalid argument for --log_format, got: {fmt}")
            changed["log_format"] = fmt
        if changed:
            self.values.update(changed)
            for listener in self._listeners:
                listener(changed)
        return self.as_json()
