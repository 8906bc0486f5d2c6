"""``pb_utils.Logger``: model log lines written to stderr in Triton's server-log format.

A worker's stderr is the server log, so a line looks exactly like Triton's::

    I1130 05:59:02.525178 11698 model.py:115] "plain msg"

(level letter, UTC month/day and time with microseconds, pid, caller file:line, then the
message quoted and escaped). VERBOSE lines print with ``I`` and only when the verbosity
set by the worker through :func:`configure_logging` is at least 1, as with
``tritonserver --log-verbose=1``.
"""

from __future__ import annotations

import enum
import json
import os
import sys
import threading
import time
from typing import TextIO


class LogLevel(enum.IntEnum):
    """Triton's ``Logger.LogLevel`` values."""

    INFO = 0
    WARNING = 1
    ERROR = 2
    VERBOSE = 3


_LETTER = {LogLevel.INFO: "I", LogLevel.WARNING: "W", LogLevel.ERROR: "E", LogLevel.VERBOSE: "I"}


class _Settings:
    verbose = 0
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


def reset_logging() -> None:
    """Back to defaults: verbosity 0, ``sys.stderr``, own pid."""
    _Settings.verbose = 0
    _Settings.stream = None
    _Settings.pid = None


def format_line(
    level: LogLevel, message: str, filename: str, lineno: int, now_ns: int, pid: int
) -> str:
    """One log line (with trailing newline) in Triton's default format.

    ``now_ns`` is wall-clock time in nanoseconds since the epoch (``time.time_ns()``).
    """
    seconds, rest = divmod(now_ns, 1_000_000_000)
    micros = rest // 1000
    t = time.gmtime(seconds)
    return (
        f"{_LETTER[level]}{t.tm_mon:02d}{t.tm_mday:02d} {t.tm_hour:02d}:{t.tm_min:02d}:"
        f"{t.tm_sec:02d}.{micros:06d} {pid} {os.path.basename(filename)}:{lineno}] "
        f"{json.dumps(message, ensure_ascii=False)}\n"
    )


def _emit(level: LogLevel, message: str, depth: int) -> None:
    if not isinstance(message, str):
        raise TypeError(f"log message must be a str, got {type(message)}")
    if level == LogLevel.VERBOSE and _Settings.verbose < 1:
        return
    frame = sys._getframe(depth)
    line = format_line(
        level,
        message,
        frame.f_code.co_filename,
        frame.f_lineno,
        time.time_ns(),  # wall clock: log timestamps are calendar time
        _Settings.pid if _Settings.pid is not None else os.getpid(),
    )
    stream = _Settings.stream if _Settings.stream is not None else sys.stderr
    with _Settings.lock:  # one whole line per write, even from model threads
        stream.write(line)
        stream.flush()


class Logger:
    """Static logging methods, as ``triton_python_backend_utils.Logger``."""

    LogLevel = LogLevel
    INFO = LogLevel.INFO
    WARNING = LogLevel.WARNING
    ERROR = LogLevel.ERROR
    VERBOSE = LogLevel.VERBOSE

    @staticmethod
    def log(message: str, level: LogLevel = LogLevel.INFO) -> None:
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
