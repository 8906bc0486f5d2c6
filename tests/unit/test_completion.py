"""Completion: callbacks run synchronously when it is settled, with a Future's interface."""

from __future__ import annotations

import asyncio
import logging

import pytest

from tritium.core import Completion


def test_callbacks_run_synchronously_in_order_on_result():
    done: Completion[list[int]] = Completion()
    seen = []
    done.add_done_callback(lambda c: seen.append(("a", c.result())))
    done.add_done_callback(lambda c: seen.append(("b", c.exception())))
    assert not done.done() and seen == []
    done.set_result([1])
    assert seen == [("a", [1]), ("b", None)]
    assert done.done() and not done.cancelled()


def test_callback_added_after_completion_runs_at_once():
    done: Completion[int] = Completion()
    done.set_exception(ValueError("boom"))
    seen = []
    done.add_done_callback(lambda c: seen.append(c.exception()))
    assert isinstance(seen[0], ValueError)
    with pytest.raises(ValueError):
        done.result()


def test_a_failing_callback_is_logged_and_the_others_still_run(caplog):
    done: Completion[int] = Completion()
    seen = []

    def bad(_):
        raise RuntimeError("consumer bug")

    done.add_done_callback(bad)
    done.add_done_callback(lambda c: seen.append(c.result()))
    with caplog.at_level(logging.ERROR, logger="tritium.core"):
        done.set_result(7)
    assert seen == [7]
    assert "consumer bug" in caplog.text


def test_pending_state_and_double_completion_are_errors():
    done: Completion[int] = Completion()
    with pytest.raises(asyncio.InvalidStateError):
        done.result()
    with pytest.raises(asyncio.InvalidStateError):
        done.exception()
    done.set_result(1)
    with pytest.raises(asyncio.InvalidStateError):
        done.set_result(2)
    with pytest.raises(asyncio.InvalidStateError):
        done.set_exception(ValueError())
    assert done.cancel() is False and done.result() == 1


def test_cancel_runs_callbacks_at_once_and_settles_as_cancelled():
    done: Completion[int] = Completion()
    seen = []
    done.add_done_callback(lambda c: seen.append(c.cancelled()))
    assert done.cancel() is True
    assert seen == [True] and done.done() and done.cancelled()
    with pytest.raises(asyncio.CancelledError):
        done.result()
    with pytest.raises(asyncio.CancelledError):
        done.exception()
    with pytest.raises(asyncio.InvalidStateError):
        done.set_result(1)
    assert done.cancel() is False


def test_a_callback_may_settle_another_completion_while_running():
    first: Completion[int] = Completion()
    second: Completion[int] = Completion()
    order = []
    first.add_done_callback(lambda c: (order.append("first"), second.set_result(c.result())))
    second.add_done_callback(lambda c: order.append(("second", c.result())))
    first.set_result(5)
    assert order == ["first", ("second", 5)]


def test_awaitable_from_a_coroutine():
    async def main():
        done: Completion[str] = Completion()
        asyncio.get_running_loop().call_soon(done.set_result, "ok")
        return await done

    assert asyncio.run(main()) == "ok"


def test_cancelling_the_awaiting_task_cancels_the_completion():
    async def main():
        done: Completion[str] = Completion()
        task = asyncio.ensure_future(_await(done))
        await asyncio.sleep(0)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return done

    assert asyncio.run(main()).cancelled()


def test_awaiting_a_cancelled_completion_raises_cancelled():
    async def main():
        done: Completion[str] = Completion()
        asyncio.get_running_loop().call_soon(done.cancel)
        await done

    with pytest.raises(asyncio.CancelledError):
        asyncio.run(main())


async def _await(done: Completion[str]) -> str:
    return await done
