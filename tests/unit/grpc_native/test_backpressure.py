"""A client that stops reading its responses stops being read from."""

from __future__ import annotations

import asyncio

from tritium.frontends.grpc.native.server import GrpcProtocol, _Shared
from tritium.frontends.grpc.options import GrpcOptions


class _Transport:
    def __init__(self) -> None:
        self.reading = True

    def write(self, data: bytes) -> None: ...

    def is_closing(self) -> bool:
        return False

    def get_extra_info(self, *args):
        return None

    def pause_reading(self) -> None:
        self.reading = False

    def resume_reading(self) -> None:
        self.reading = True

    def close(self) -> None: ...


def test_reading_pauses_while_the_write_buffer_is_full() -> None:
    async def run() -> None:
        shared = _Shared(None, GrpcOptions(port=0))  # type: ignore[arg-type]
        protocol = GrpcProtocol(shared)
        transport = _Transport()
        protocol.connection_made(transport)  # type: ignore[arg-type]
        protocol.pause_writing()
        assert not transport.reading
        protocol.resume_writing()
        assert transport.reading

    asyncio.run(run())
