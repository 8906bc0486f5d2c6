"""``Completion``: a one-shot result whose done-callbacks run the moment it is settled.

An ``asyncio.Future`` runs its done-callbacks on a later turn of the event loop, one
scheduled handle each, so every future between a worker's reply and the client costs a
pass through the loop per callback. The consumers of a request's or a batch's result —
the scheduler, the service's statistics, the frontend that encodes the answer — are plain
callbacks, so a completion calls them synchronously instead, with the interface of
``asyncio.Future`` that they use (``add_done_callback``, ``result``, ``exception``,
``cancel``, ``cancelled``, ``done``) and awaitable from coroutines.

Because callbacks run inside ``set_result``/``set_exception``/``cancel``, a callback must
not assume it runs on a fresh loop turn: it may run while its caller is in the middle of
other work (the schedulers and frontends are written for that).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Generator
from typing import Any, Generic, TypeVar

log = logging.getLogger("tritium.core")

T = TypeVar("T")

_PENDING = 0
_FINISHED = 1
_CANCELLED = 2


class Completion(Generic[T]):
    """A one-shot result whose callbacks run synchronously when it is settled.

    Callbacks added after completion run at once. A callback that raises is logged (as
    the event loop would) and does not stop the others.
    """

    __slots__ = ("_state", "_result", "_exception", "_callbacks")

    def __init__(self) -> None:
        self._state = _PENDING
        self._result: Any = None
        self._exception: BaseException | None = None
        self._callbacks: list[Callable[[Completion[T]], None]] = []

    def done(self) -> bool:
        return self._state != _PENDING

    def cancelled(self) -> bool:
        return self._state == _CANCELLED

    def result(self) -> T:
        state = self._state
        if state == _FINISHED:
            if self._exception is not None:
                raise self._exception
            return self._result
        if state == _CANCELLED:
            raise asyncio.CancelledError()
        raise asyncio.InvalidStateError("the result is not set yet")

    def exception(self) -> BaseException | None:
        state = self._state
        if state == _FINISHED:
            return self._exception
        if state == _CANCELLED:
            raise asyncio.CancelledError()
        raise asyncio.InvalidStateError("the result is not set yet")

    def add_done_callback(self, callback: Callable[[Completion[T]], None]) -> None:
        if self._state != _PENDING:
            self._call(callback)
        else:
            self._callbacks.append(callback)

    def set_result(self, result: T) -> None:
        # Written out rather than shared with set_exception: this runs for every request.
        if self._state != _PENDING:
            raise asyncio.InvalidStateError("the completion is already settled")
        self._state = _FINISHED
        self._result = result
        callbacks = self._callbacks
        if callbacks:
            self._callbacks = []
            for callback in callbacks:
                try:
                    callback(self)
                except Exception:  # noqa: BLE001 - one consumer's bug must not starve the others
                    log.exception("completion callback %r failed", callback)

    def set_exception(self, exception: BaseException) -> None:
        if self._state != _PENDING:
            raise asyncio.InvalidStateError("the completion is already settled")
        self._state = _FINISHED
        self._exception = exception
        self._run_callbacks()

    def cancel(self, msg: Any = None) -> bool:
        """Settle as cancelled (callbacks run now); False when already settled."""
        if self._state != _PENDING:
            return False
        self._state = _CANCELLED
        self._run_callbacks()
        return True

    def _run_callbacks(self) -> None:
        callbacks = self._callbacks
        if callbacks:
            self._callbacks = []
            for callback in callbacks:
                self._call(callback)

    def _call(self, callback: Callable[[Completion[T]], None]) -> None:
        try:
            callback(self)
        except Exception:  # noqa: BLE001 - one consumer's bug must not starve the others
            log.exception("completion callback %r failed", callback)

    def __await__(self) -> Generator[Any, None, T]:
        """Awaitable from a coroutine: waits on a loop future; cancelling the awaiting
        task cancels this completion, as awaiting a Future does."""
        if self._state == _PENDING:
            waiter = asyncio.get_running_loop().create_future()

            def wake(_: Completion[T]) -> None:
                if not waiter.done():
                    waiter.set_result(None)

            self._callbacks.append(wake)
            try:
                yield from waiter.__await__()
            except asyncio.CancelledError:
                self.cancel()
                raise
        return self.result()
