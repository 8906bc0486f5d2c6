"""A request's one done-callback runs its steps in the stated order (reshape, classify,
shared-memory outputs and release, statistics, spinner, trace), and the lean one for
plain requests counts exactly as the full one does."""

from __future__ import annotations

from functools import partial
from types import SimpleNamespace

import numpy as np

from tritium.core import Completion, InferRequest, InferResponse, OutputTensor
from tritium.core.errors import Unavailable
from tritium.service.requests.submitter import settle, settle_plain
from tritium.service.shared_memory.tensors import RequestRegions


class _Stats:
    def __init__(self, steps: list[str]) -> None:
        self.steps = steps
        self.requests: list[bool] = []
        self.failures: list[int] = []

    def record_request(self, ok: bool, total_ns: int, queue_ns: int) -> None:
        self.steps.append("stats")
        self.requests.append(ok)

    def record_failure(self, total_ns: int, reason: int) -> None:
        self.steps.append("stats")
        self.failures.append(reason)


def _loaded(steps: list[str]) -> SimpleNamespace:
    return SimpleNamespace(
        name="m",
        version_str="1",
        stats=_Stats(steps),
        reshaper=SimpleNamespace(apply=lambda response: steps.append("reshape")),
        classifier=SimpleNamespace(apply=lambda response, wanted: steps.append("classify")),
    )


def _response() -> InferResponse:
    out = OutputTensor("OUT", "FP32", (1,), np.zeros(1, np.float32))
    return InferResponse("", "", outputs=[out])


def test_steps_run_in_the_stated_order() -> None:
    steps: list[str] = []
    loaded = _loaded(steps)
    request = InferRequest("m", id="r", classification={"OUT": 1})
    used = RequestRegions(SimpleNamespace(release=lambda: steps.append("release")))  # type: ignore[arg-type]
    spinner = SimpleNamespace(end=lambda: steps.append("spinner"))
    recorder = SimpleNamespace(finish=lambda loaded, request, done: steps.append("trace"))
    done: Completion[InferResponse] = Completion()
    done.add_done_callback(
        lambda d: settle(loaded, request, used, spinner, recorder, d)  # type: ignore[arg-type]
    )
    done.set_result(_response())
    assert steps == ["reshape", "classify", "release", "stats", "spinner", "trace"]
    response = done.result()
    assert (response.model_name, response.model_version, response.id) == ("m", "1", "r")
    assert loaded.stats.requests == [True]


def test_a_failed_request_skips_the_output_steps_but_not_the_others() -> None:
    steps: list[str] = []
    loaded = _loaded(steps)
    request = InferRequest("m", classification={"OUT": 1})
    used = RequestRegions(SimpleNamespace(release=lambda: steps.append("release")))  # type: ignore[arg-type]
    spinner = SimpleNamespace(end=lambda: steps.append("spinner"))
    done: Completion[InferResponse] = Completion()
    done.add_done_callback(
        lambda d: settle(loaded, request, used, spinner, None, d)  # type: ignore[arg-type]
    )
    done.set_exception(Unavailable("gone"))
    assert steps == ["release", "stats", "spinner"]


def test_plain_settle_counts_as_the_full_one() -> None:
    for outcome in ("ok", "error", "raised", "cancelled"):
        counts = []
        for settle_one in (
            lambda loaded, request, d: settle(loaded, request, None, None, None, d),
            settle_plain,
        ):
            loaded = _loaded([])
            loaded.reshaper = None
            request = InferRequest("m", id="r")
            done: Completion[InferResponse] = Completion()
            done.add_done_callback(partial(settle_one, loaded, request))  # type: ignore[arg-type]
            if outcome == "ok":
                done.set_result(_response())
            elif outcome == "error":
                response = _response()
                response.error = Unavailable("model said no")
                done.set_result(response)
            elif outcome == "raised":
                done.set_exception(Unavailable("gone"))
            else:
                done.cancel()
            counts.append((loaded.stats.requests, loaded.stats.failures))
        assert counts[0] == counts[1], outcome
