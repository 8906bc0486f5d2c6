"""Messages that need no reply, in both directions between a worker and the server.

To the server: a notice is ``{"op": "notice", "kind": <kind>, ...}``; the server routes it
by ``kind`` (``tritium.workers.notices``) and never mistakes it for a reply. Sent just
before a reply, so what a model did during ``execute`` is on the server when the client
gets its answer.

From the server: ``ONE_WAY`` maps the ops the worker applies between two batches without
answering (new logging settings).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tritium.backends.python.pb_utils_logger import apply_log_settings
from tritium.backends.python.pb_utils_metrics import take_updates


def _log_settings(message: dict[str, Any]) -> None:
    apply_log_settings(message.get("settings") or {})


ONE_WAY: dict[str, Callable[[dict[str, Any]], None]] = {
    "log_settings": _log_settings,
}


def send_notices(send: Callable[[dict[str, Any]], None]) -> None:
    """Send what is pending (custom-metric updates) with ``send``; nothing when nothing
    changed."""
    updates = take_updates()
    if updates is not None:
        send({"op": "notice", "kind": "metrics", "updates": updates})
