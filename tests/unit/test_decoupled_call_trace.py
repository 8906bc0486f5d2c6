"""A sampled decoupled call is recorded in the trace once, when both its batch was taken by
``execute`` and its final response went out, whichever comes last; with the compute window
its instance stamped on the request for that batch, or none when the batch never ran."""

from __future__ import annotations

from types import SimpleNamespace

from tritium.core import Completion, InferRequest, InferResponse
from tritium.core.errors import Unavailable
from tritium.service.requests.streams import DecoupledCall

DISPATCH_NS = 5_000


class Recorder:
    def __init__(self) -> None:
        self.records: list[tuple[str, int, tuple[int, int] | None]] = []

    def record(self, loaded, request, end_ns, window) -> None:
        self.records.append((request.id, end_ns, window))


def _call(traced: bool = True) -> tuple[DecoupledCall, Completion, Recorder, list]:
    instance = SimpleNamespace(cancel=lambda request: None)
    loaded = SimpleNamespace(
        name="m",
        version_str="1",
        version=1,
        instances=[instance],
        stats=SimpleNamespace(record_request=lambda ok, total, queue: None),
        first_response=None,
        reshaper=None,
    )
    request = InferRequest("m", id="r", arrival_ns=1_000)
    emitted: list = []
    call = DecoupledCall(loaded, request, lambda c, response, final: emitted.append(final))
    recorder = Recorder()
    if traced:
        call.traced(recorder)
    scheduled: Completion = Completion()
    call.start(scheduled)
    return call, scheduled, recorder, emitted


def _run(call: DecoupledCall, input_ns: int = 100, output_ns: int = 7) -> None:
    """The instance ran the batch: dispatch time and the worker's timing, stamped on the
    request as the instance stamps them."""
    call.request.dispatch_ns = DISPATCH_NS
    call.request.compute_ns = (input_ns, 50, output_ns)


def _response() -> InferResponse:
    return InferResponse("m", "1", "r")


def test_taken_then_final_records_once_at_the_final_response() -> None:
    call, scheduled, recorder, emitted = _call()
    _run(call)
    scheduled.set_result(None)
    assert recorder.records == []
    call.on_response(_response(), False)
    assert recorder.records == []
    call.on_response(None, True)
    ((request_id, end_ns, window),) = recorder.records
    assert (request_id, window) == ("r", (100, 7))
    assert end_ns > DISPATCH_NS
    assert emitted == [False, True]


def test_final_before_the_batch_reply_records_when_the_reply_comes() -> None:
    # A plain ``def execute`` sends its responses before it returns.
    call, scheduled, recorder, _ = _call()
    call.on_response(_response(), False)
    call.on_response(None, True)
    assert recorder.records == []
    _run(call)
    scheduled.set_result(None)
    assert [(r[0], r[2]) for r in recorder.records] == [("r", (100, 7))]


def test_cancelled_while_queued_records_once_without_a_window() -> None:
    call, scheduled, recorder, emitted = _call()
    call.cancel()
    assert scheduled.cancelled()
    assert [(r[0], r[2]) for r in recorder.records] == [("r", None)]
    call.cancel()
    assert len(recorder.records) == 1
    assert emitted == []


def test_cancelled_while_running_records_at_the_cancel() -> None:
    call, scheduled, recorder, _ = _call()
    _run(call)
    scheduled.set_result(None)
    call.cancel()
    call.on_response(None, True)  # what the model still sends goes nowhere
    assert [(r[0], r[2]) for r in recorder.records] == [("r", (100, 7))]


def test_failed_before_execute_records_once_without_a_window() -> None:
    call, scheduled, recorder, emitted = _call()
    scheduled.set_exception(Unavailable("instance gone"))
    assert emitted == [True]
    assert [(r[0], r[2]) for r in recorder.records] == [("r", None)]


def test_an_unsampled_call_records_nothing() -> None:
    call, scheduled, recorder, emitted = _call(traced=False)
    _run(call)
    scheduled.set_result(None)
    call.on_response(None, True)
    assert recorder.records == [] and emitted == [True]
