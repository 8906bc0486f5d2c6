"""The stop's pieces without a server: Triton's countdown texts, and a second signal that
cuts the graceful stop short."""

from __future__ import annotations

import asyncio
import logging

import pytest

from tritium.server.shutdown import Countdown, StopSignals


def test_countdown_logs_tritons_lines_in_tritons_order(caplog: pytest.LogCaptureFixture) -> None:
    left = [30.0]

    async def main() -> None:
        countdown = Countdown(lambda: left[0], lambda: 1, lambda: 2)
        countdown.start()
        await asyncio.sleep(0)  # the first line at once
        left[0] = 28.4
        countdown.unloading()
        countdown.stop()

    with caplog.at_level(logging.INFO, logger="tritium.server"):
        asyncio.run(main())
    assert [r.getMessage() for r in caplog.records] == [
        "Waiting for in-flight requests to complete.",
        "Timeout 30: Found 1 model versions that have in-flight inferences",
        "All models are stopped, unloading models",
        "Timeout 29: Found 2 live models and 0 in-flight non-inference requests",
    ]


def test_a_second_signal_cancels_the_graceful_stop() -> None:
    async def main() -> tuple[bool, bool, bool]:
        signals = StopSignals(asyncio.get_running_loop())
        cancelled = asyncio.Event()

        async def slow_stop() -> None:
            try:
                await asyncio.sleep(60)
            except asyncio.CancelledError:
                cancelled.set()
                raise

        signals._received(15)
        first_only = signals.first.is_set() and not signals.second.is_set()
        asyncio.get_running_loop().call_later(0.05, signals._received, 2)
        finished = await asyncio.wait_for(signals.unless_second(slow_stop()), 5)
        return first_only, finished, cancelled.is_set()

    assert asyncio.run(main()) == (True, False, True)


def test_without_a_second_signal_the_stop_runs_to_its_end() -> None:
    async def main() -> bool:
        signals = StopSignals(asyncio.get_running_loop())
        return await signals.unless_second(asyncio.sleep(0.01))

    assert asyncio.run(main()) is True
