"""A gRPC connection's answers made while a batch is handed out are written when the
batch's hand-out ends (with the HTTP answers of the same batch), not at the end of the
loop iteration, after that iteration's reads."""

from __future__ import annotations

import asyncio

from tritium.core.write_burst import WRITES
from tritium.frontends.grpc.native.server import GrpcProtocol, _Shared
from tritium.frontends.grpc.options import GrpcOptions
from tritium.testing.fakes import FakeTransport


def _connection() -> tuple[GrpcProtocol, FakeTransport]:
    proto = GrpcProtocol(_Shared(None, GrpcOptions()))  # type: ignore[arg-type]
    transport = FakeTransport()
    proto.connection_made(transport)
    proto.flush()  # the server's preface
    transport.data.clear()
    return proto, transport


def test_a_flush_scheduled_during_a_hand_out_happens_at_its_end() -> None:
    async def run() -> None:
        proto, transport = _connection()
        with WRITES.held():
            proto.conn.ping(b"12345678")
            proto.schedule_flush()
            proto.schedule_flush()  # one flush for many answers
            assert transport.data == b""
        assert transport.data  # written before the loop turns again
        written = bytes(transport.data)
        await asyncio.sleep(0)
        assert transport.data == written  # and only once
        proto.connection_lost(None)

    asyncio.run(run())


def test_outside_a_hand_out_the_flush_waits_for_the_end_of_the_loop_iteration() -> None:
    async def run() -> None:
        proto, transport = _connection()
        proto.conn.ping(b"12345678")
        proto.schedule_flush()
        assert transport.data == b""
        await asyncio.sleep(0)
        assert transport.data
        proto.connection_lost(None)

    asyncio.run(run())
