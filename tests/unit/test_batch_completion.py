"""BatchCompletion: a batch's callbacks run synchronously, with a Future's interface."""

from __future__ import annotations

import asyncio
import logging

import pytest

from tritium.workers import BatchCompletion


def test_callbacks_run_synchronously_in_order_on_result():
    done: BatchCompletion[list[int]] = BatchCompletion()
    seen = []
    done.add_done_callback(lambda c: seen.append(("a", c.result())))
    done.add_done_callback(lambda c: seen.append(("b", c.exception())))
    assert not done.done() and seen == []
    done.set_result([1])
    assert seen == [("a", [1]), ("b", None)]
    assert done.done() and not done.cancelled()


def test_callback_added_after_completion_runs_at_once():
    done: BatchCompletion[int] = BatchCompletion()
    done.set_exception(ValueError("boom"))
    seen = []
    done.add_done_callback(lambda c: seen.append(c.exception()))
    assert isinstance(seen[0], ValueError)
    with pytest.raises(ValueError):
        done.result()


def test_a_failing_callback_is_logged_and_the_others_still_run(caplog):
    done: BatchCompletion[int] = BatchCompletion()
    seen = []

    def bad(_):
        raise RuntimeError("consumer bug")

    done.add_done_callback(bad)
    done.add_done_callback(lambda c: seen.append(c.result()))
    with caplog.at_level(logging.ERROR, logger="tritium.workers"):
        done.set_result(7)
    assert seen == [7]
    assert "consumer bug" in caplog.text


def test_pending_state_and_double_completion_are_errors():
    done: BatchCompletion[int] = BatchCompletion()
    with pytest.raises(RuntimeError):
        done.result()
    with pytest.raises(RuntimeError):
        done.exception()
    done.set_result(1)
    with pytest.raises(RuntimeError):
        done.set_result(2)
    with pytest.raises(RuntimeError):
        done.set_exception(ValueError())


def test_awaitable_from_a_coroutine():
    async def main():
        done: BatchCompletion[str] = BatchCompletion()
        asyncio.get_running_loop().call_soon(done.set_result, "ok")
        return await done

    assert asyncio.run(main()) == "ok"
