"""L2: server ⇄ worker transport: memfd arenas for tensors, framed messages for control.

Every message kind is declared in :mod:`tritium.ipc.messages`; ``framing`` carries them on
the control socket, ``call_records`` on the call channel (BLS).
"""

from tritium.ipc.arena import Arena, align, grow_size
from tritium.ipc.framing import (
    FrameDecoder,
    MessageReader,
    encode,
    recv_fd,
    send_fd,
    send_message,
)

__all__ = [
    "Arena",
    "FrameDecoder",
    "MessageReader",
    "align",
    "encode",
    "grow_size",
    "recv_fd",
    "send_fd",
    "send_message",
]
