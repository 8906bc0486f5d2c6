"""Server log lines in Triton's format: ``I1130 05:52:28.123456 1234 app.py:42] message``."""

from __future__ import annotations

import logging
import os
import sys
import time

_LETTER = {"DEBUG": "V", "INFO": "I", "WARNING": "W", "ERROR": "E", "CRITICAL": "E"}


class TritonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        t = time.localtime(record.created)
        micros = int((record.created % 1) * 1_000_000)
        head = (
            f"{_LETTER.get(record.levelname, 'I')}{t.tm_mon:02d}{t.tm_mday:02d} "
            f"{t.tm_hour:02d}:{t.tm_min:02d}:{t.tm_sec:02d}.{micros:06d} {os.getpid()} "
            f"{os.path.basename(record.pathname)}:{record.lineno}] "
        )
        text = head + record.getMessage()
        if record.exc_info:
            text += "\n" + self.formatException(record.exc_info)
        return text


def configure(*, verbose: int, info: bool, warning: bool, error: bool) -> None:
    if verbose > 0:
        level = logging.DEBUG
    elif info:
        level = logging.INFO
    elif warning:
        level = logging.WARNING
    elif error:
        level = logging.ERROR
    else:
        level = logging.CRITICAL + 1
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(TritonFormatter())
    root = logging.getLogger("tritium")
    root.handlers[:] = [handler]
    root.setLevel(level)
    root.propagate = False
