"""Routes the notices a worker sends unasked (``{"op": "notice", "kind": ...}``).

Each kind has one handler, given the instance's label and the message; a kind nobody
handles is logged and dropped, so an older server never mistakes a notice for a reply.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from tritium.core.custom_metrics import registry as custom_metrics

log = logging.getLogger("tritium.workers")


def _metrics(label: str, message: dict[str, Any]) -> None:
    custom_metrics.apply(message.get("updates") or [])


HANDLERS: dict[str, Callable[[str, dict[str, Any]], None]] = {
    "metrics": _metrics,
}


def handle_notice(label: str, message: dict[str, Any]) -> None:
    handler = HANDLERS.get(message.get("kind", ""))
    if handler is None:
        log.warning("%s: unknown notice from worker: %.200r", label, message)
        return
    handler(label, message)
