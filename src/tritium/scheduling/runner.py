"""What a scheduler drives: an instance that runs one batch at a time."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from tritium.core import InferRequest, InferResponse
from tritium.core.errors import Cancelled, InternalError, TritiumError


class BatchOutcome(Protocol):
    """The outcome of one batch: an ``asyncio.Future``, or any object with the same
    done-callback interface (a worker's ``Completion`` calls its callbacks synchronously)."""

    def add_done_callback(self, callback: Callable[[Any], object], /) -> None: ...

    def done(self) -> bool: ...

    def cancelled(self) -> bool: ...

    def exception(self) -> BaseException | None: ...

    def result(self) -> list[InferResponse]: ...


def batch_responses(
    done: BatchOutcome,
    runner_name: str,
    expected: int,
    unpack: Callable[[list[InferResponse]], list[InferResponse]] | None = None,
) -> tuple[list[InferResponse], TritiumError | None]:
    """What a finished batch gives its requests: ``(responses, None)`` when it ran and
    answered each of the ``expected`` requests (after ``unpack``), else ``([], error)``
    with the error every request of the batch gets."""
    if done.cancelled():
        return [], Cancelled("request was cancelled")
    exc = done.exception()
    if exc is not None:
        return [], exc if isinstance(exc, TritiumError) else InternalError(str(exc))
    responses = done.result()
    if unpack is not None:
        responses = unpack(responses)
    if len(responses) != expected:
        return [], InternalError(
            f"instance '{runner_name}' returned {len(responses)} responses "
            f"for {expected} requests"
        )
    return responses, None


class Runner(Protocol):
    name: str

    @property
    def running(self) -> bool:
        """False while the instance is down (crashed, restarting)."""
        ...

    def submit(self, batch: list[InferRequest]) -> BatchOutcome:
        """Start ``batch`` at once; the completion gets one response per request.

        Its callbacks may run synchronously when the batch ends, so a scheduler's callback
        may be re-entered from ``submit`` of another runner's completion."""
        ...

    def cancel(self, request: InferRequest) -> None:
        """Tell the running batch that ``request``'s client has gone away."""
        ...

    def when_ready(self, callback: Callable[[], None]) -> None:
        """Call back once the runner can take a batch again."""
        ...

    def on_restart_failure(self, callback: Callable[[], None]) -> None: ...
