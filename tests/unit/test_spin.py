"""The request spinner keeps the loop polling while one request is in flight (or just was),
and while several are as long as its trials found that it pays; it stops by itself: after
its budget, after the linger time, when a trial turns it off, and never starts when turned
off."""

from __future__ import annotations

import asyncio
import time

from tritium.service.requests import spin
from tritium.service.requests.spin import RequestSpinner
from tritium.testing import FakeClock


async def _turns_while(spinner: RequestSpinner, seconds: float) -> int:
    """Loop turns counted by a callback chain while ``spinner`` spins (at most ``seconds``)."""
    deadline = time.monotonic() + seconds
    turns = 0
    while spinner.spinning and time.monotonic() < deadline:
        await asyncio.sleep(0)
        turns += 1
    return turns


def test_one_request_in_flight_polls_until_its_budget_then_sleeps():
    async def main() -> None:
        spinner = RequestSpinner(busy_ns=30_000_000, linger_ns=0)
        started = time.monotonic()
        spinner.begin()
        assert spinner.spinning
        await _turns_while(spinner, 5.0)
        elapsed = time.monotonic() - started
        assert not spinner.spinning
        assert 0.025 <= elapsed < 2.0
        assert spinner.in_flight == 1  # the request is still in flight: only polling stopped

    asyncio.run(main())


def test_several_in_flight_poll_only_while_the_trials_found_it_pays(monkeypatch):  # noqa: ANN001
    clock = FakeClock(1_000_000_000)
    monkeypatch.setattr(spin, "now_ns", clock)

    async def main() -> None:
        spinner = RequestSpinner(busy_ns=10_000_000_000, linger_ns=0)
        spinner.begin()  # alone: polls whatever the trials say
        assert spinner.spinning
        spinner.begin()  # the first trial period runs without polling
        await _turns_while(spinner, 5.0)
        assert not spinner.spinning
        assert spinner.in_flight == 2
        spinner.trials.on = True  # as when a trial period with polling begins
        spinner.begin()
        assert spinner.spinning
        await asyncio.sleep(0)
        assert spinner.spinning
        spinner.trials.on = False  # the next period: polling stops at the next turn
        await _turns_while(spinner, 5.0)
        assert not spinner.spinning
        for _ in range(3):
            spinner.end()
        assert spinner.in_flight == 0

    asyncio.run(main())


def test_after_the_last_answer_it_lingers_then_goes_quiet():
    async def main() -> None:
        spinner = RequestSpinner(busy_ns=10_000_000_000, linger_ns=20_000_000)
        spinner.begin()
        await asyncio.sleep(0)
        assert spinner.spinning
        answered = time.monotonic()
        spinner.end()
        await _turns_while(spinner, 5.0)
        assert not spinner.spinning
        assert 0.015 <= time.monotonic() - answered < 2.0
        # Idle: nothing starts it again, the loop sleeps.
        await asyncio.sleep(0.01)
        assert not spinner.spinning

    asyncio.run(main())


def test_turned_off_it_never_polls():
    async def main() -> None:
        spinner = RequestSpinner(busy_ns=0, linger_ns=0)
        spinner.begin()
        assert not spinner.spinning
        spinner.end()
        assert not spinner.spinning
        assert spinner.in_flight == 0

    asyncio.run(main())


def test_after_a_lone_request_outlasted_the_budget_the_next_one_sleeps_until_answered(
    monkeypatch,
):  # noqa: ANN001
    # Which request counts as slow depends only on the times read, so the clock is fake:
    # a loaded machine cannot turn a quick answer into a slow one.
    clock = FakeClock(1_000_000_000)
    monkeypatch.setattr(spin, "now_ns", clock)

    async def main() -> None:
        spinner = RequestSpinner(busy_ns=5_000_000, linger_ns=0)
        spinner.begin()
        assert spinner.spinning
        clock.now += 6_000_000  # its 5 ms of polling are spent
        await _turns_while(spinner, 5.0)
        assert not spinner.spinning
        clock.now += 10_000_000
        spinner.end()  # answered after 16 ms: a slow model
        spinner.begin()
        assert not spinner.spinning  # no polling for this one
        clock.now += 1_000_000
        spinner.end()  # answered within the budget
        spinner.begin()
        assert spinner.spinning  # quick answers: polling again
        spinner.end()

    asyncio.run(main())


def test_answers_given_at_once_linger_unless_other_clients_are_sending(monkeypatch):  # noqa: ANN001
    # Response-cache replays are never in flight: one alone (a lone client) keeps the loop
    # polling for the next; two within CROWDED_NS come from several clients and stop it.
    clock = FakeClock(1_000_000_000)
    monkeypatch.setattr(spin, "now_ns", clock)

    async def main() -> None:
        spinner = RequestSpinner(busy_ns=1_000_000, linger_ns=150_000)
        spinner.linger()
        assert spinner.spinning
        clock.now += 80_000  # a lone client's next request, a round trip later
        spinner.linger()
        await asyncio.sleep(0)
        assert spinner.spinning
        clock.now += 3_000  # another client's request in the same burst
        spinner.linger()
        await _turns_while(spinner, 5.0)
        assert not spinner.spinning
        clock.now += 200_000
        spinner.begin()  # requests in flight: an answer at once does not linger
        spinner.begin()
        clock.now += 2_000_000  # their polling budget is spent
        await _turns_while(spinner, 5.0)
        assert not spinner.spinning
        clock.now += 100_000
        spinner.linger()
        assert not spinner.spinning
        spinner.end()
        spinner.end()
        # Turned off: never polls.
        quiet = RequestSpinner(busy_ns=0, linger_ns=0)
        quiet.linger()
        assert not quiet.spinning

    asyncio.run(main())


def test_instances_poll_after_a_batch_when_one_request_is_in_flight_or_the_loop_polls():
    spinner = RequestSpinner(busy_ns=0, linger_ns=0)
    assert not spinner.workers_poll()  # nothing in flight
    spinner.begin()
    assert spinner.workers_poll()  # one client waits: its next request follows the answer
    spinner.begin()
    assert not spinner.workers_poll()  # several, and the trials chose not to poll
    spinner.trials.on = True
    assert spinner.workers_poll()  # several, and the loop polls: so do the instances
    spinner.end()
    spinner.trials.on = False
    assert spinner.workers_poll()
