"""Which of Triton's failure reasons a failed request counts under.

``nv_inference_request_failure`` splits failures by ``reason``: REJECTED (the scheduler
refused it: queue full or queue timeout), CANCELED (the client went away or cancelled),
BACKEND (the model or its instance failed: an error response, a raising ``execute``, a
crashed worker) and OTHER (anything else, e.g. the model unloading under the request).
"""

from __future__ import annotations

from tritium.core.errors import Cancelled, Rejected
from tritium.core.statistics import BACKEND, CANCELED, OTHER, REJECTED
from tritium.workers.process import WorkerDied


def failure_reason(exc: BaseException) -> int:
    """The reason index (``tritium.core.statistics``) for a request that raised ``exc``."""
    if isinstance(exc, Rejected):
        return REJECTED
    if isinstance(exc, Cancelled):
        return CANCELED
    if isinstance(exc, WorkerDied):
        return BACKEND
    return OTHER
