"""Termination signals turned into ``SystemExit`` for scripts that start servers.

A Python program killed by SIGTERM or SIGHUP (``kill``, ``timeout``, a closed terminal, a
CI runner cancelling a job) dies at once by default: no ``finally`` block and no
``with ServerProcess(...)`` exit runs, so a ``tritium serve`` child started in its own
session outlives it. Inside ``exit_on_signals()`` those signals raise ``SystemExit`` in the
main thread instead, so the program unwinds exactly as on Ctrl-C and stops its servers.
SIGINT raises ``KeyboardInterrupt`` there even where the program started with SIGINT
ignored (a background job of a script: ``tool &``), as ``tritium serve`` itself does.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

TERMINATING = (signal.SIGTERM, signal.SIGHUP)


class Terminated(SystemExit):
    """Raised in the main thread when a termination signal arrives."""


def _raise(signum: int, frame: FrameType | None) -> None:
    # Once: a second signal while the program unwinds must not cut its cleanup short.
    for sig in TERMINATING:
        signal.signal(sig, signal.SIG_IGN)
    raise Terminated(128 + signum)


@contextmanager
def exit_on_signals() -> Iterator[None]:
    """Within the block, SIGTERM and SIGHUP raise ``Terminated`` (exit status 128 + the
    signal number) and SIGINT ``KeyboardInterrupt``; the previous handlers come back
    afterwards. Only the main thread can set handlers; elsewhere the block runs unchanged."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {sig: signal.signal(sig, _raise) for sig in TERMINATING}
    previous[signal.SIGINT] = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
