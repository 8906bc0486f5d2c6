"""Messages a worker sends the server unasked, before its next reply.

A notice is ``{"op": "notice", "kind": <kind>, ...}``; the server routes it by ``kind``
(``tritium.workers.notices``) and never mistakes it for a reply. Sent just before a reply,
so what a model did during ``execute`` is on the server when the client gets its answer.
"""

from __future__ import annotations

import socket

from tritium.backends.python.pb_utils_metrics import take_updates
from tritium.ipc import send_message


def send_notices(ctl: socket.socket) -> None:
    """Send what is pending (custom-metric updates); nothing when nothing changed."""
    updates = take_updates()
    if updates is not None:
        send_message(ctl, {"op": "notice", "kind": "metrics", "updates": updates})
