"""A BLS call to a decoupled model (``exec(decoupled=True)``), served in the main process.

The request goes through the submitter's ``submit_step(request, stream=...)`` like a
client's stream; each response the model sends becomes one answer on the caller's call channel, in order,
and the model's final mark ends the call with a last answer (the final response, or an
empty one when the model sent the final flag alone, as Triton's iterator yields).

The call ends early, with a final error answer and the decoupled request cancelled (the
model sees ``is_cancelled()``), when its timeout expires, when the caller cancels it or
drops its iterator, or when the caller leaves more than ``MAX_UNREAD`` answers untaken:
a caller that stops reading never makes the server hold more than that for it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from tritium.core import InferRequest, InferResponse
from tritium.core.errors import Cancelled, TritiumError, Unavailable
from tritium.ipc.call_records import MAX_UNREAD, Tensor
from tritium.ipc.messages import CallReply
from tritium.service.requests.streams import DecoupledCall
from tritium.service.requests.submitter import SubmitStep
from tritium.workers.calls import WorkerCall

TIMEOUT_MESSAGE = "Request timeout expired"
CANCELLED_MESSAGE = "BLS request was cancelled"


class StreamedBlsCall:
    """Answers ``call`` with the responses of a decoupled request sent through ``submit``;
    ``ended()`` once the call is over (answered, failed or abandoned)."""

    __slots__ = ("_submit", "_ended", "_call", "_decoupled", "_timer")

    def __init__(self, submit: SubmitStep, call: WorkerCall, ended: Callable[[], None]) -> None:
        self._submit = submit
        self._ended = ended
        self._call: WorkerCall | None = call
        self._decoupled: DecoupledCall | None = None
        self._timer: asyncio.TimerHandle | None = None

    def start(self, request: InferRequest) -> None:
        call = self._call
        assert call is not None
        call.on_abandon = self._abandoned
        call.open_stream(self._cancelled)
        try:
            self._decoupled = self._submit(  # type: ignore[assignment]
                request, stream=self._emit
            )
        except TritiumError as exc:
            self._fail(exc)
            return
        if request.timeout_us > 0 and self._call is not None:
            self._timer = asyncio.get_running_loop().call_later(
                request.timeout_us / 1e6, self._fail, Unavailable(TIMEOUT_MESSAGE)
            )

    def _emit(self, decoupled: DecoupledCall, response: InferResponse | None, final: bool) -> None:
        self._decoupled = decoupled
        call = self._call
        if call is None:
            return
        message, tensors = _answer(response)
        if final:
            self._end()
            call.reply(message, tensors)
        elif not call.send_part(message, tensors):
            self._fail(
                Unavailable(
                    f"BLS request cancelled: the caller left more than {MAX_UNREAD} "
                    "responses unread"
                )
            )

    def _cancelled(self) -> None:
        self._fail(Cancelled(CANCELLED_MESSAGE))

    def _fail(self, error: TritiumError) -> None:
        """End the call now with ``error`` as its last answer; cancel the request."""
        call = self._end()
        if call is None:
            return
        if self._decoupled is not None:
            self._decoupled.cancel()
        call.reply(CallReply(error=(error.code.name, error.message)))

    def _abandoned(self) -> None:
        """The caller's worker went away: nobody to answer."""
        self._end()
        if self._decoupled is not None:
            self._decoupled.cancel()

    def _end(self) -> WorkerCall | None:
        call, self._call = self._call, None
        if call is not None:
            self._ended()
            if self._timer is not None:
                self._timer.cancel()
        return call


def _answer(response: InferResponse | None) -> tuple[CallReply, list[Tensor]]:
    if response is None:
        return CallReply(), []
    if response.error is not None:
        error = response.error
        if isinstance(error, TritiumError):
            return CallReply(error=(error.code.name, error.message)), []
        return CallReply(error=("INTERNAL", str(error))), []
    message = CallReply(params=response.parameters or None)
    return message, [(o.name, o.datatype, o.data) for o in response.outputs]
