"""Messages that need no reply, in both directions between a worker and the server.

To the server: each notice is a message kind of its own (``MetricUpdates``); the server
routes it by type (``WorkerProcess.handlers``) and never mistakes it for a reply. Sent
just before a reply, so what a model did during ``execute`` is on the server when the
client gets its answer.

From the server: ``ONE_WAY`` maps the message kinds the worker applies between two
batches without answering (new logging settings).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tritium.backends.python.pb_utils_logger import apply_log_settings
from tritium.backends.python.pb_utils_metrics import take_updates
from tritium.ipc.messages import LogSettings, MetricUpdates, ToServer


def _log_settings(message: LogSettings) -> None:
    apply_log_settings(message.settings)


ONE_WAY: dict[type[Any], Callable[[Any], None]] = {
    LogSettings: _log_settings,
}


def send_notices(send: Callable[[ToServer], None]) -> None:
    """Send what is pending (custom-metric updates) with ``send``; nothing when nothing
    changed."""
    updates = take_updates()
    if updates is not None:
        send(MetricUpdates(updates))
