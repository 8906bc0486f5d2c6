"""``exit_on_signals``: a script that starts servers unwinds on SIGINT, SIGTERM and SIGHUP,
even where it was started with SIGINT ignored (a background job of a shell script).

Each case runs in a child process: a signal sent to the test process itself would reach
whatever process-wide signal state earlier tests left behind."""

from __future__ import annotations

import signal
import subprocess
import sys

import pytest

# The program under test: it reports what unwound its block.
PROGRAM = """
import sys, time
from tritium.testing import exit_on_signals
from tritium.testing.signals import Terminated
try:
    with exit_on_signals():
        print("ready", flush=True)
        time.sleep(30)
    print("not interrupted", flush=True)
except KeyboardInterrupt:
    print("KeyboardInterrupt", flush=True)
except Terminated as exc:
    print(f"Terminated {exc.code}", flush=True)
"""

# Starts PROGRAM as a fresh Python that inherits SIGINT ignored, as a background job does.
IGNORING_SIGINT = """
import os, signal, sys
signal.signal(signal.SIGINT, signal.SIG_IGN)
os.execv(sys.executable, [sys.executable, "-c", sys.argv[1]])
"""


def _unwound_by(sig: int, *, sigint_ignored: bool) -> str:
    args = ["-c", IGNORING_SIGINT, PROGRAM] if sigint_ignored else ["-c", PROGRAM]
    child = subprocess.Popen(
        [sys.executable, *args], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    try:
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "ready"
        child.send_signal(sig)
        out, _ = child.communicate(timeout=20)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait(10)
    return out.strip()


@pytest.mark.parametrize("ignored", [True, False], ids=["sigint-ignored", "sigint-default"])
def test_sigint_interrupts_even_when_it_was_ignored(ignored: bool) -> None:
    assert _unwound_by(signal.SIGINT, sigint_ignored=ignored) == "KeyboardInterrupt"


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP], ids=["SIGTERM", "SIGHUP"])
def test_termination_signals_exit_with_128_plus_the_signal(sig: int) -> None:
    assert _unwound_by(sig, sigint_ignored=False) == f"Terminated {128 + sig}"
