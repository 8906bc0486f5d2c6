"""A stream's messages waiting behind one compressed on a thread are bounded like its
unsent bytes: past the bound the stream is reset (the client is not reading)."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

from tritium.frontends.grpc.native import stream_replies
from tritium.frontends.grpc.native.call import GrpcCall
from tritium.frontends.grpc.native.frames import ENHANCE_YOUR_CALM
from tritium.frontends.grpc.native.sending import MAX_QUEUED_BYTES


class _Conn:
    def __init__(self) -> None:
        self.resets: list[int] = []
        self.messages: list[tuple[int, bytes]] = []

    def reset_stream(self, stream: object, code: int) -> None:
        self.resets.append(code)

    def send_headers(self, stream: object, block: bytes, end_stream: bool = False) -> None: ...

    def send_message(self, stream: object, flag: int, payload: bytes) -> bool:
        self.messages.append((flag, payload))
        return True


def _call(loop: asyncio.AbstractEventLoop, conn: _Conn) -> GrpcCall:
    call = GrpcCall.__new__(GrpcCall)
    call.proto = SimpleNamespace(  # type: ignore[assignment]
        loop=loop, max_message_length=1 << 30, compression_level=1, schedule_flush=lambda: None
    )
    call.conn = conn  # type: ignore[assignment]
    call.stream = SimpleNamespace(queued=0)  # type: ignore[assignment]
    call.out_encoding = "gzip"
    call.timer = None
    call.future = None
    call.infer_stream = None
    call.head_sent = False
    call.closed = False
    call.compressing = None
    call.waiting_bytes = 0
    call.idle_pending = False
    return call


def test_messages_waiting_behind_a_compression_are_sent_in_order() -> None:
    async def run() -> list:
        conn = _Conn()
        call = _call(asyncio.get_running_loop(), conn)
        big = bytes(stream_replies.OFFLOAD_BYTES)
        for reply in (big, b"small", b"after"):
            call._emit(reply)
        while call.compressing is not None:
            await asyncio.sleep(0.01)
        return conn.messages

    messages = asyncio.run(run())
    sizes = [len(stream_replies.w.decompress("gzip", payload, 1 << 30)) for _, payload in messages]
    assert [flag for flag, _ in messages] == [1, 1, 1]
    assert sizes == [stream_replies.OFFLOAD_BYTES, 5, 5]


def test_too_many_bytes_waiting_behind_a_compression_reset_the_stream() -> None:
    async def run() -> tuple[_Conn, GrpcCall]:
        conn = _Conn()
        call = _call(asyncio.get_running_loop(), conn)
        half = bytes(MAX_QUEUED_BYTES // 2 + 1)
        for _ in range(3):
            call._emit(half)
        return conn, call

    conn, call = asyncio.run(run())
    assert conn.resets == [ENHANCE_YOUR_CALM] and call.closed
