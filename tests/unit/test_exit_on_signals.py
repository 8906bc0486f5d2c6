"""``exit_on_signals``: a script that starts servers unwinds on SIGINT, SIGTERM and SIGHUP,
even where it was started with SIGINT ignored (a background job of a shell script)."""

from __future__ import annotations

import os
import signal
import time

import pytest

from tritium.testing import exit_on_signals
from tritium.testing.signals import Terminated


def _wait_for_signal() -> None:
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        time.sleep(0.01)
    raise AssertionError("the signal did not interrupt the block")


def test_sigint_interrupts_even_when_it_was_ignored() -> None:
    before = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        with pytest.raises(KeyboardInterrupt), exit_on_signals():
            os.kill(os.getpid(), signal.SIGINT)
            _wait_for_signal()
        assert signal.getsignal(signal.SIGINT) == signal.SIG_IGN  # given back
    finally:
        signal.signal(signal.SIGINT, before)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP])
def test_termination_signals_exit_with_128_plus_the_signal(sig: int) -> None:
    before = signal.getsignal(sig)
    with pytest.raises(Terminated) as raised, exit_on_signals():
        os.kill(os.getpid(), sig)
        _wait_for_signal()
    assert raised.value.code == 128 + sig
    assert signal.getsignal(sig) == before
