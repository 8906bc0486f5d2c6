"""The native gRPC endpoint: an ``asyncio.Protocol`` per connection over
:class:`H2Connection`, TLS with ALPN "h2", keepalive pings, connection age, and a
graceful stop (GOAWAY, in-flight streams finish within the grace period).

Writes are coalesced: bytes produced while handling received data go out in one
``transport.write`` at the end; responses finished from done callbacks are flushed
once the batch they answer has been handed out, or once per loop iteration.
"""

from __future__ import annotations

import asyncio
import logging
import os
import ssl
from typing import Any

from tritium.core.write_burst import WRITES
from tritium.frontends.grpc.infer_plans import RequestPlans
from tritium.frontends.grpc.native import grpc_wire as w
from tritium.frontends.grpc.native.call_opening import open_call, restricted_paths
from tritium.frontends.grpc.native.connection import H2Connection, Stream, StreamReceiver
from tritium.frontends.grpc.options import GrpcOptions, TlsFiles
from tritium.frontends.sweep import ConnectionSweep, sweep_period
from tritium.service.api import ServiceApi

logger = logging.getLogger("tritium.frontends.grpc")

#: Streams one connection may have open at once (excess ones are refused).
MAX_CONCURRENT_STREAMS = 1024
#: Largest encoded request header block: a little over the 64 KiB header-list limit, so
#: that decoding one (HPACK in Python, ~0.35 ms per KiB of Huffman code) never holds the
#: event loop for more than ~30 ms; a bigger block closes the connection (ENHANCE_YOUR_CALM).
MAX_HEADER_BLOCK = 80 * 1024


class _Shared:
    """What every connection of one server reads."""

    def __init__(self, service: ServiceApi, options: GrpcOptions) -> None:
        self.service = service
        self.options = options
        self.loop = asyncio.get_running_loop()
        self.max_message_length = options.max_message_length
        self.response_compression = options.response_compression
        self.compression_level = w.COMPRESSION_LEVELS.get(options.response_compression, 6)
        self.connections: set[GrpcProtocol] = set()
        self.stopping = False
        #: Decoded ModelInfer headers, shared by all connections (clients repeat them).
        self.plans = RequestPlans()
        #: :path → the header its calls must carry (only restricted methods are here).
        self.restricted_paths = restricted_paths(options.restricted)


class GrpcProtocol(asyncio.Protocol):
    """One client connection."""

    def __init__(self, shared: _Shared) -> None:
        self.shared = shared
        self.service = shared.service
        self.loop = shared.loop
        self.max_message_length = shared.max_message_length
        self.response_compression = shared.response_compression
        self.compression_level = shared.compression_level
        self.plans = shared.plans
        self.restricted_paths = shared.restricted_paths
        keepalive = shared.options.keepalive
        self.conn = H2Connection(
            self,
            max_concurrent_streams=MAX_CONCURRENT_STREAMS,
            max_header_block=MAX_HEADER_BLOCK,
            min_ping_interval=keepalive.min_recv_ping_interval_without_data_ms / 1000,
            max_ping_strikes=keepalive.max_ping_strikes,
            permit_idle_pings=keepalive.permit_without_calls,
        )
        self.conn.on_ping_ack = self._ping_acked
        self.transport: asyncio.Transport | None = None
        self.debug = logger.isEnabledFor(logging.DEBUG)
        self._flush_scheduled = False
        self._timers: dict[str, asyncio.TimerHandle] = {}
        self.closed = False
        self._write_paused = False
        #: id(header list) → (header list, checked headers); see ``call_opening.open_call``.
        self.checked_headers: dict[int, tuple[Any, Any]] = {}
        # Idle timeout: the last stream id seen idle by the sweep, and since when.
        self._idle_key: int | None = None
        self._idle_since = 0.0

    # --------------------------------------------------------- asyncio hooks

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        self.shared.connections.add(self)
        if self.debug:
            logger.debug("GRPC connection from %s opened", transport.get_extra_info("peername"))
        if self.shared.stopping:
            transport.close()
            return
        self.conn.initiate()
        keepalive = self.shared.options.keepalive
        if keepalive.time_ms and keepalive.time_ms > 0:
            self._later("keepalive", keepalive.time_ms / 1000, self._keepalive)
        if keepalive.max_connection_age_ms:
            self._later("age", keepalive.max_connection_age_ms / 1000, self._too_old)
        self.flush()

    def data_received(self, data: bytes) -> None:
        self.conn.receive(data)
        self.flush()

    def pause_writing(self) -> None:
        # The client is not reading its responses: read no new requests until it does,
        # so the answers waiting in the transport's buffer stay bounded.
        self._write_paused = True
        if self.transport is not None and not self.closed:
            self.transport.pause_reading()

    def resume_writing(self) -> None:
        self._write_paused = False
        if self.transport is not None and not self.closed:
            self.transport.resume_reading()

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self.shared.connections.discard(self)
        if self.debug and self.transport is not None:
            peer = self.transport.get_extra_info("peername")
            logger.debug("GRPC connection from %s closed", peer)
        for timer in self._timers.values():
            timer.cancel()
        self._timers.clear()
        self.conn.connection_lost()

    # ------------------------------------------------------------ streams

    def stream_opened(self, stream: Stream, headers: list[tuple[str, str]]) -> StreamReceiver:
        return open_call(self, stream, headers)

    # ------------------------------------------------------------- output

    def flush(self) -> None:
        """Write what the connection has queued; close once it is finished."""
        self._flush_scheduled = False
        if self.closed:
            return
        conn = self.conn
        if conn.out:
            if conn.out_big:  # views of a big response: written as they lie
                self.transport.writelines(conn.take_output())  # type: ignore[union-attr]
            else:
                self.transport.write(conn.data_to_send())  # type: ignore[union-attr]
        if conn.closed or ((conn.goaway_sent or conn.peer_goaway) and not conn.streams):
            self.closed = True
            self.transport.close()  # type: ignore[union-attr]

    def schedule_flush(self) -> None:
        """Flush once the batch being handed out has been (see ``write_burst``), else at
        the end of this loop iteration: one write for many responses either way."""
        if not self._flush_scheduled:
            self._flush_scheduled = True
            if WRITES.depth:
                WRITES.write(self._flush_queued, None)
            else:
                self.loop.call_soon(self.flush)

    def _flush_queued(self, _: object) -> None:
        self.flush()

    def goaway(self) -> None:
        """Refuse new streams; close once open ones have finished."""
        self.conn.goaway()
        self.flush()

    def shut_down(self) -> None:
        """The server is stopping: GOAWAY, and end every stream that waits for nothing
        (an idle ModelStreamInfer) so that only requests in flight keep the connection."""
        self.conn.goaway()
        for stream in list(self.conn.streams.values()):
            end = getattr(stream.receiver, "end_at_shutdown", None)
            if end is not None:
                end()
        self.flush()

    def in_flight(self) -> int:
        """Streams still open (each a call in flight)."""
        return len(self.conn.streams)

    def abort(self) -> None:
        if not self.closed and self.transport is not None:
            self.closed = True
            self.transport.abort()

    def sweep(self, now: float) -> None:
        """GOAWAY (then close) a connection that has had no open stream for the idle
        timeout; a new stream id since the last sweep means it was not idle."""
        conn = self.conn
        if conn.streams or self.closed:
            self._idle_key = None
            return
        if conn.last_stream_id != self._idle_key:
            self._idle_key, self._idle_since = conn.last_stream_id, now
        elif now - self._idle_since >= self.shared.options.idle_timeout_s:
            self.goaway()

    # ---------------------------------------------------- keepalive and age

    def _later(self, name: str, delay: float, callback: Any) -> None:
        self._timers[name] = self.loop.call_later(delay, callback)

    def _keepalive(self) -> None:
        keepalive = self.shared.options.keepalive
        if self.closed:
            return
        # As grpc core does: no new ping while one is still unanswered.
        if "ping_timeout" not in self._timers and (
            self.conn.streams or keepalive.permit_without_calls
        ):
            self.conn.ping(os.urandom(8))
            self.flush()
            self._later("ping_timeout", keepalive.timeout_ms / 1000, self._ping_timeout)
        self._later("keepalive", keepalive.time_ms / 1000, self._keepalive)

    def _ping_acked(self, opaque: bytes) -> None:
        timer = self._timers.pop("ping_timeout", None)
        if timer is not None:
            timer.cancel()

    def _ping_timeout(self) -> None:
        logger.info("gRPC keepalive ping not answered: closing the connection")
        self.abort()

    def _too_old(self) -> None:
        self.goaway()
        grace = self.shared.options.keepalive.max_connection_age_grace_ms
        if grace is not None and grace >= 0:
            self._later("age_grace", grace / 1000, self.abort)


def tls_context(tls: TlsFiles) -> ssl.SSLContext:
    """A server context with ALPN "h2"; mutual TLS requires a client certificate."""
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(tls.server_cert, tls.server_key)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.set_alpn_protocols(["h2"])
    if tls.mutual:
        context.verify_mode = ssl.CERT_REQUIRED
        context.load_verify_locations(cafile=tls.root_cert or None)
    return context


class NativeGrpcServer:
    """A running native gRPC endpoint."""

    def __init__(self, server: asyncio.Server, shared: _Shared, port: int) -> None:
        self._server = server
        self._shared = shared
        self._port = port
        self._sweep = ConnectionSweep(shared.connections, sweep_period(shared.options.idle_timeout_s))

    @property
    def port(self) -> int:
        """The bound port (the real one when started with port 0)."""
        return self._port

    @property
    def connections(self) -> int:
        return len(self._shared.connections)

    @property
    def in_flight(self) -> int:
        """Calls still open on every connection."""
        return sum(proto.in_flight() for proto in self._shared.connections)

    async def stop(self, grace: float) -> None:
        """GOAWAY every connection and end idle streams at once, let calls in flight
        finish for up to ``grace`` seconds, then close what is left."""
        shared = self._shared
        shared.stopping = True
        self._server.close()
        self._sweep.close()
        for proto in list(shared.connections):
            proto.shut_down()
        deadline = shared.loop.time() + max(grace, 0.0)
        while shared.connections and shared.loop.time() < deadline:
            await asyncio.sleep(0.01)
        for proto in list(shared.connections):
            proto.abort()
        try:
            await asyncio.wait_for(self._server.wait_closed(), 1.0)
        except asyncio.TimeoutError:
            pass


async def start_native_grpc_server(service: ServiceApi, options: GrpcOptions) -> NativeGrpcServer:
    """Serve Triton's ``GRPCInferenceService`` (and ``grpc.health.v1``) on the event loop."""
    shared = _Shared(service, options)
    context = tls_context(options.tls) if options.tls is not None else None
    server = await shared.loop.create_server(
        lambda: GrpcProtocol(shared),
        options.host,
        options.port,
        ssl=context,
        reuse_address=True,
        reuse_port=options.reuse_port or None,
        backlog=1024,
    )
    port = server.sockets[0].getsockname()[1]
    return NativeGrpcServer(server, shared, port)
