"""Server log lines in Triton's format, the log file, and the levels in force.

``I1130 05:52:28.123456 1234 app.py:42] "message"`` (or ``--log-format=ISO8601``). The
message is quoted and escaped (``tritium.core.log_lines``) so request-derived text cannot
forge a line; multi-line tables whose format string starts with a newline (the model
table) are written as they are, as Triton does. Each of Triton's levels switches on its
own (``--log-info/warning/error``, ``--log-verbose``), now or later through the logging
extension (``apply``).

``--log-file`` is opened for appending and becomes this process's stderr, so the
server's lines, every worker's ``pb_utils.Logger`` lines and tracebacks all land in it
and the terminal keeps nothing.
"""

from __future__ import annotations

import logging
import os
import sys
from typing import Any

from tritium.core.log_lines import DEFAULT, head, quote, quote_traceback

_LETTER = {"DEBUG": "I", "INFO": "I", "WARNING": "W", "ERROR": "E", "CRITICAL": "E"}


class _State:
    fmt = DEFAULT
    verbose = 0
    info = True
    warning = True
    error = True


class TritonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        text = record.getMessage()
        raw = isinstance(record.msg, str) and record.msg.startswith("\n")
        shown = text if raw else quote(text)
        if record.exc_info:
            shown += "\n" + quote_traceback(self.formatException(record.exc_info), _State.fmt)
        return head(
            _LETTER.get(record.levelname, "I"),
            int(record.created * 1_000_000_000),
            record.process or os.getpid(),
            os.path.basename(record.pathname),
            record.lineno,
            _State.fmt,
        ) + shown


class _LevelFilter(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        level = record.levelno
        if level < logging.INFO:
            return _State.verbose > 0
        if level < logging.WARNING:
            return _State.info
        if level < logging.ERROR:
            return _State.warning
        return _State.error


def open_log_file(path: str) -> None:
    """Send this process's stderr (and so its workers') to ``path``, appending."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        sys.stderr.flush()
        os.dup2(fd, 2)
    finally:
        os.close(fd)


def apply(settings: dict[str, Any]) -> None:
    """Levels and format from the logging extension's keys (those present)."""
    if "log_verbose_level" in settings:
        _State.verbose = int(settings["log_verbose_level"])
    if "log_info" in settings:
        _State.info = bool(settings["log_info"])
    if "log_warning" in settings:
        _State.warning = bool(settings["log_warning"])
    if "log_error" in settings:
        _State.error = bool(settings["log_error"])
    if "log_format" in settings:
        _State.fmt = str(settings["log_format"])
    root = logging.getLogger("tritium")
    root.setLevel(logging.DEBUG if _State.verbose > 0 else logging.INFO)


def configure(
    *,
    verbose: int,
    info: bool,
    warning: bool,
    error: bool,
    fmt: str = DEFAULT,
    log_file: str = "",
) -> None:
    if log_file:
        open_log_file(log_file)
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(TritonFormatter())
    handler.addFilter(_LevelFilter())
    root = logging.getLogger("tritium")
    root.handlers[:] = [handler]
    root.propagate = False
    apply(
        {
            "log_verbose_level": verbose,
            "log_info": info,
            "log_warning": warning,
            "log_error": error,
            "log_format": fmt,
        }
    )
