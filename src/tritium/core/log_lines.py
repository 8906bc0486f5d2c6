"""One log line in Triton's server-log format, for the server and for model workers.

``default``::   I1201 22:03:25.477889 9020 model.py:15] "message"
``ISO8601``::   2026-12-01T22:04:08Z I 9020 model.py:15] "message"

The message is written as a JSON string (quotes, backslashes, newlines and control
characters escaped), as Triton does, so text that came from a request — a model name, a
request id, an error message — can never end the line early or start a forged one.
"""

from __future__ import annotations

import json
import time

DEFAULT = "default"
ISO8601 = "ISO8601"


def quote(message: str) -> str:
    return json.dumps(message, ensure_ascii=False)


def quote_traceback(text: str, fmt: str) -> str:
    """A traceback after a line's head: in the default format its first line quoted and
    the rest as raw lines, each indented, so a terminal shows it as Python printed it and
    no line of it (even one a request put in an exception's message) starts like a log
    line. ISO8601, read by machines more than people, keeps one escaped line."""
    if fmt == ISO8601:
        return quote(text)
    first, *rest = text.rstrip("\n").splitlines() or [""]
    return quote(first) + "".join("\n  " + line for line in rest)


def head(letter: str, now_ns: int, pid: int, filename: str, lineno: int, fmt: str) -> str:
    """Everything before the message; ``now_ns`` is wall-clock ns since the epoch (UTC)."""
    seconds, rest = divmod(now_ns, 1_000_000_000)
    t = time.gmtime(seconds)
    if fmt == ISO8601:
        stamp = (
            f"{t.tm_year:04d}-{t.tm_mon:02d}-{t.tm_mday:02d}T"
            f"{t.tm_hour:02d}:{t.tm_min:02d}:{t.tm_sec:02d}Z {letter}"
        )
    else:
        stamp = (
            f"{letter}{t.tm_mon:02d}{t.tm_mday:02d} {t.tm_hour:02d}:{t.tm_min:02d}:"
            f"{t.tm_sec:02d}.{rest // 1000:06d}"
        )
    return f"{stamp} {pid} {filename}:{lineno}] "
