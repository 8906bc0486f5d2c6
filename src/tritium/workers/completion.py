"""``BatchCompletion``: the result of one batch, delivered the moment the reply arrives.

An ``asyncio.Future`` runs its done-callbacks on a later turn of the event loop, so every
future between the worker's reply and the caller costs one loop iteration (a poll and a
pass over the ready queue). A batch's consumers — the instance's statistics and the
scheduler, which hands the runner its next batch and completes the caller's future — are
plain callbacks, so this object calls them synchronously instead, with the same
``add_done_callback``/``result``/``exception`` interface the schedulers already use.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Generator
from typing import Any, Generic, TypeVar

log = logging.getLogger("tritium.workers")

T = TypeVar("T")
_PENDING = object()


class BatchCompletion(Generic[T]):
    """A one-shot result whose callbacks run synchronously when it is set.

    Callbacks added after completion run at once. A callback that raises is logged (as
    the event loop would) and does not stop the others. It can never be cancelled.
    """

    __slots__ = ("_result", "_exception", "_callbacks")

    def __init__(self) -> None:
        self._result: Any = _PENDING
        self._exception: BaseException | None = None
        self._callbacks: list[Callable[[BatchCompletion[T]], None]] = []

    def done(self) -> bool:
        return self._result is not _PENDING or self._exception is not None

    def cancelled(self) -> bool:
        return False

    def result(self) -> T:
        if self._exception is not None:
            raise self._exception
        if self._result is _PENDING:
            raise RuntimeError("the batch has not completed yet")
        return self._result

    def exception(self) -> BaseException | None:
        if self._exception is None and self._result is _PENDING:
            raise RuntimeError("the batch has not completed yet")
        return self._exception

    def add_done_callback(self, callback: Callable[[BatchCompletion[T]], None]) -> None:
        if self.done():
            self._call(callback)
        else:
            self._callbacks.append(callback)

    def set_result(self, result: T) -> None:
        if self.done():
            raise RuntimeError("the batch has already completed")
        self._result = result
        self._run_callbacks()

    def set_exception(self, exception: BaseException) -> None:
        if self.done():
            raise RuntimeError("the batch has already completed")
        self._exception = exception
        self._run_callbacks()

    def _run_callbacks(self) -> None:
        callbacks, self._callbacks = self._callbacks, []
        for callback in callbacks:
            self._call(callback)

    def _call(self, callback: Callable[[BatchCompletion[T]], None]) -> None:
        try:
            callback(self)
        except Exception:  # noqa: BLE001 - one consumer's bug must not starve the others
            log.exception("batch completion callback %r failed", callback)

    def __await__(self) -> Generator[Any, None, T]:
        """Awaitable from a coroutine (tests, tools): waits on a loop future."""
        if not self.done():
            waiter = asyncio.get_running_loop().create_future()

            def wake(_: BatchCompletion[T]) -> None:
                if not waiter.done():
                    waiter.set_result(None)

            self._callbacks.append(wake)
            yield from waiter.__await__()
        return self.result()
