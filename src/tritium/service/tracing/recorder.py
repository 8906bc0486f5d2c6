"""What both trace modes share: a sampled request's timestamps, Triton's names in
order, and the recorder interface (``finish`` as the request settles, ``record``)."""

from __future__ import annotations

from tritium.core import InferRequest
from tritium.core.clock import now_ns
from tritium.core.completion import Completion
from tritium.service.model.interface import ServedVersion

#: (input ns, output ns) the worker measured for a request's batch; None when it never ran.
Window = tuple[int, int] | None


def compute_window(request: InferRequest) -> Window:
    """(input ns, output ns) the worker measured for the batch that ran ``request``
    (stamped on it by its instance)."""
    timing = request.compute_ns
    if timing is None or not request.dispatch_ns:
        return None
    return timing[0], timing[2]


def timestamps(request: InferRequest, end_ns: int, window: Window) -> list[tuple[str, int]]:
    stamps = [("REQUEST_START", request.arrival_ns), ("QUEUE_START", request.arrival_ns)]
    if window is not None and request.dispatch_ns:
        start = request.dispatch_ns
        input_ns, output_ns = window
        input_end = min(start + input_ns, end_ns)
        output_start = max(end_ns - output_ns, input_end)
        stamps += [
            ("COMPUTE_START", start),
            ("COMPUTE_INPUT_END", input_end),
            ("COMPUTE_OUTPUT_START", output_start),
            ("COMPUTE_END", end_ns),
        ]
    stamps.append(("REQUEST_END", end_ns))
    return stamps


class Recorder:
    """What both trace modes share: a sampled request's end becomes one ``record``."""

    def finish(self, loaded: ServedVersion, request: InferRequest, done: Completion) -> None:
        """Done-callback of a sampled request: record its trace."""
        window = None if done.cancelled() else compute_window(request)
        self.record(loaded, request, now_ns(), window)

    def record(
        self, loaded: ServedVersion, request: InferRequest, end: int, window: Window
    ) -> None:
        """Record the trace of a request that ended at ``end`` (monotonic ns)."""
        raise NotImplementedError

    async def close(self) -> None:
        """Write or export what is still held (at shutdown)."""
