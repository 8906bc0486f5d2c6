"""``pb_utils.Logger``: model log lines written to stderr in Triton's server-log format.

A worker's stderr is the server log (the terminal, or ``--log-file``), so a line looks
exactly like Triton's::

    I1130 05:59:02.525178 11698 model.py:115] "plain msg"

(level letter, UTC month/day and time with microseconds, pid, caller file:line, then the
message quoted and escaped; ``--log-format=ISO8601`` changes the timestamp). VERBOSE lines
print with ``I`` and only when the verbosity is at least 1, as with
``tritonserver --log-verbose=1``; ``--log-info/warning/error=false`` silence their level.
The server sends changes made through the logging extension to running workers
(:func:`apply_log_settings`); a new worker starts from ``TRITIUM_LOG_SETTINGS``.
"""

from __future__ import annotations

import enum
import json
import os
import sys
import threading
import time
import traceback
from typing import Any, TextIO

from tritium.core.log_lines import DEFAULT, head, quote, quote_traceback

# Set by the server for its workers: the logging settings in force when a worker starts.
ENV = "TRITIUM_LOG_SETTINGS"


class LogLevel(enum.IntEnum):
    """Triton's ``Logger.LogLevel`` values."""

    INFO = 0
    WARNING = 1
    ERROR = 2
    VERBOSE = 3


_LETTER = {LogLevel.INFO: "I", LogLevel.WARNING: "W", LogLevel.ERROR: "E", LogLevel.VERBOSE: "I"}


class _Settings:
    verbose = 0
    enabled = {0: True, 1: True, 2: True}  # INFO, WARNING, ERROR
    fmt = DEFAULT
    # The model repository: a line from a file under it names that file from there
    # ("add_sub/1/model.py"), so the log says which model wrote it.
    root = ""
    stream: TextIO | None = None  # None: whatever sys.stderr is at the time of the call
    pid: int | None = None  # None: this process's pid
    lock = threading.Lock()


def configure_logging(
    verbose: int | None = None,
    stream: TextIO | None = None,
    pid: int | None = None,
) -> None:
    """Set the verbosity (``--log-verbose``), the output stream and the pid shown.

    Arguments left as None keep their current value.
    """
    if verbose is not None:
        _Settings.verbose = int(verbose)
    if stream is not None:
        _Settings.stream = stream
    if pid is not None:
        _Settings.pid = int(pid)


def apply_log_settings(settings: dict[str, Any]) -> None:
    """Apply the logging extension's settings (``log_info``, ``log_verbose_level``, ...)."""
    if "log_verbose_level" in settings:
        _Settings.verbose = int(settings["log_verbose_level"])
    for key, level in (("log_info", 0), ("log_warning", 1), ("log_error", 2)):
        if key in settings:
            _Settings.enabled = {**_Settings.enabled, level: bool(settings[key])}
    if "log_format" in settings:
        _Settings.fmt = str(settings["log_format"])


def apply_startup_settings(default_verbose: int, repository: str = "") -> None:
    """At model load: the server's current settings when it passed them, else the default;
    ``repository`` is the model repository the model's lines are named from."""
    if repository:
        _Settings.root = os.path.join(os.path.abspath(repository), "")
    text = os.environ.get(ENV)
    if text:
        try:
            apply_log_settings(json.loads(text))
            return
        except (ValueError, TypeError):
            pass
    _Settings.verbose = int(default_verbose)


def reset_logging() -> None:
    """Back to defaults: verbosity 0, every level on, default format, stderr, own pid."""
    _Settings.verbose = 0
    _Settings.enabled = {0: True, 1: True, 2: True}
    _Settings.fmt = DEFAULT
    _Settings.root = ""
    _Settings.stream = None
    _Settings.pid = None


def format_line(
    level: LogLevel,
    message: str,
    filename: str,
    lineno: int,
    now_ns: int,
    pid: int,
    fmt: str = DEFAULT,
    is_traceback: bool = False,
) -> str:
    """One log line (with trailing newline) in Triton's format; with ``is_traceback``,
    ``message`` is one, written readably (``quote_traceback``).

    ``now_ns`` is wall-clock time in nanoseconds since the epoch (``time.time_ns()``).
    """
    letter = _LETTER[level]
    shown = os.path.basename(filename) if os.path.isabs(filename) else filename
    text = quote_traceback(message, fmt) if is_traceback else quote(message)
    return head(letter, now_ns, pid, shown, lineno, fmt) + text + "\n"


def _emit(level: LogLevel, message: str, depth: int, is_traceback: bool = False) -> None:
    if not isinstance(message, str):
        raise TypeError(f"log message must be a str, got {type(message)}")
    if level == LogLevel.VERBOSE:
        if _Settings.verbose < 1:
            return
    elif not _Settings.enabled.get(int(level), True):
        return
    frame = sys._getframe(depth)
    filename = frame.f_code.co_filename
    root = _Settings.root
    if root and filename.startswith(root):
        filename = filename[len(root) :]
    line = format_line(
        level,
        message,
        filename,
        frame.f_lineno,
        time.time_ns(),  # wall clock: log timestamps are calendar time
        _Settings.pid if _Settings.pid is not None else os.getpid(),
        _Settings.fmt,
        is_traceback,
    )
    stream = _Settings.stream if _Settings.stream is not None else sys.stderr
    with _Settings.lock:  # one whole line per write, even from model threads
        stream.write(line)
        stream.flush()


def log_exception(exc: BaseException | None = None) -> None:
    """``exc`` (default: the exception being handled), with its traceback, as an ERROR
    line followed by the traceback's lines.

    Used where a worker reports a model's failure: the traceback may hold text from a
    request, so every line of it is indented (``quote_traceback``) and none can pass for
    a log line of its own.
    """
    text = traceback.format_exc() if exc is None else "".join(traceback.format_exception(exc))
    _emit(LogLevel.ERROR, text, 2, is_traceback=True)


class Logger:
    """Static logging methods, as ``triton_python_backend_utils.Logger``."""

    LogLevel = LogLevel
    INFO = LogLevel.INFO
    WARNING = LogLevel.WARNING
    ERROR = LogLevel.ERROR
    VERBOSE = LogLevel.VERBOSE

    @staticmethod
    def log(message: str, level: int = LogLevel.INFO) -> None:
        _emit(LogLevel(level), message, 2)

    @staticmethod
    def log_info(message: str) -> None:
        _emit(LogLevel.INFO, message, 2)

    @staticmethod
    def log_warn(message: str) -> None:
        _emit(LogLevel.WARNING, message, 2)

    @staticmethod
    def log_error(message: str) -> None:
        _emit(LogLevel.ERROR, message, 2)

    @staticmethod
    def log_verbose(message: str) -> None:
        _emit(LogLevel.VERBOSE, message, 2)
