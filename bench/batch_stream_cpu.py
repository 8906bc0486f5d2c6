"""Main-process CPU per request of batched ModelStreamInfer traffic, in process, without sockets.

What ``perf_analyzer -i grpc --streaming -m identity --shape INPUT0:16 --concurrency-range
64:64`` makes the server do, minus the sockets: the real ``identity`` model of
``bench/model_repository`` is loaded by the service's model manager (its dynamic batcher, its
instance, a real worker process), and one native-transport connection carries 64
ModelStreamInfer streams with one request outstanding on each (ids "0", "1", … per stream, as
perf_analyzer numbers them). Whenever the server writes a stream's response, that stream's
next request is fed back; what became due in one loop turn goes in one read, as a socket would
deliver it. The number printed is this process's CPU only: the worker runs in its own process,
and valgrind, which does not follow it, counts the main process alone. The client's side
(framing requests, reading the server's frame headers) is included: 1–2 µs per request.

The batcher's clock stands still while the server handles one read (see ``ReadClock``), so
every read of 64 requests is one full batch however fast the machine or valgrind runs, and the
count of instructions per request is repeatable; ``--wall-clock`` lets batch sizes follow the
machine's speed instead, as with real clients. For instruction counts, fix the hash seed (dict
probing otherwise differs from run to run) and take the difference of two lengths:

    .venv/bin/python bench/batch_stream_cpu.py [--requests N] [--profile] [--wall-clock]
    PYTHONHASHSEED=0 valgrind --tool=callgrind --callgrind-out-file=/dev/null \
        .venv/bin/python bench/batch_stream_cpu.py --requests 1000    # then 3000: Δ/2000
"""

from __future__ import annotations

import argparse
import asyncio
import os
import struct
import sys
import time
from functools import partial
from pathlib import Path

# OpenBLAS's idle threads spin for a while after numpy is imported, for as long as the
# machine lets them: thousands of instructions per request under valgrind, never the same.
# Nothing here multiplies matrices, so one thread (none spinning) changes nothing else.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

# Run as a script, bench/ itself is on sys.path; shared pieces are imported as `bench.*`.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np  # noqa: E402
from hpack import Encoder  # noqa: E402
from tritonclient.grpc import service_pb2  # noqa: E402

from bench.closed_loop import (  # noqa: E402
    MODEL,
    WARMUP,
    ReadClock,
    batcher_on_read_clock,
    measured,
    run_with_model,
    wait_answered,
)
from tritium.frontends.grpc.native import frames as f  # noqa: E402
from tritium.frontends.grpc.native.server import GrpcProtocol, _Shared  # noqa: E402
from tritium.frontends.grpc.options import GrpcOptions  # noqa: E402
from tritium.service import ModelManager, Service  # noqa: E402

STREAMS = 64  # perf_analyzer's --concurrency-range 64:64: one stream per context
#: The client grants the server's response bytes back once this many are read (as grpc does
#: at about half of the default 64 KiB window).
WINDOW_REFILL = 32_768

INPUT = np.arange(16, dtype=np.float32)

_FRAME = f.HEADER
_U32 = struct.Struct(">L")

_HEADERS = [
    (":method", "POST"),
    (":scheme", "http"),
    (":path", "/inference.GRPCInferenceService/ModelStreamInfer"),
    (":authority", "127.0.0.1:8001"),
    ("te", "trailers"),
    ("content-type", "application/grpc"),
    ("user-agent", "grpc-c++/1.67.0 grpc-c/44.0.0 (linux; chttp2)"),
    ("grpc-accept-encoding", "identity, deflate, gzip"),
]


def _message_parts() -> tuple[bytes, bytes]:
    """The serialised request around its id: what comes before field 3 and what after.

    perf_analyzer's async contexts number their requests "0", "1", … (one counter per
    context); everything else is the same in every request.
    """
    head = service_pb2.ModelInferRequest(model_name=MODEL).SerializeToString()
    rest = service_pb2.ModelInferRequest()
    rest.inputs.add(name="INPUT0", datatype="FP32", shape=[1, INPUT.size])
    rest.outputs.add(name="OUTPUT0")
    rest.raw_input_contents.append(INPUT.tobytes())
    tail = rest.SerializeToString()
    # Fields are written in field-number order, so this is what a protobuf encoder gives.
    full = service_pb2.ModelInferRequest(model_name=MODEL, id="42")
    full.MergeFrom(rest)
    if full.SerializeToString() != head + _id_field("42") + tail:
        raise SystemExit("the request cannot be built around its id")
    return head, tail


def _id_field(request_id: str) -> bytes:
    raw = request_id.encode()
    return b"\x1a" + bytes((len(raw),)) + raw  # field 3, length-delimited; ids are short


class _Peer:
    """perf_analyzer's end of the connection, as the transport the protocol writes to.

    Reads the server's frames as they are written (DATA: one response message each;
    HEADERS are ignored), and answers from a callback of its own on the next loop turn —
    never from inside the protocol's write.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop, clock: ReadClock | None) -> None:
        self.loop = loop
        self.clock = clock
        self.protocol: GrpcProtocol | None = None
        self.head, self.tail = _message_parts()
        self.sids = [2 * i + 1 for i in range(STREAMS)]
        self.next_id = dict.fromkeys(self.sids, 0)
        #: stream → its last response message, as (written bytes, start, end)
        self.last_reply: dict[int, tuple[bytes, int, int]] = {}
        self.messages: list[bytes] = []  # the gRPC message of request id "0", "1", …
        self.due: list[int] = []
        self.control: list[bytes] = []  # frames the client owes (acks, window updates)
        self.turn_scheduled = False
        self.conn_read = 0
        self.stream_read = dict.fromkeys(self.sids, 0)
        self.budget = 0
        self.outstanding = 0
        self.responses = 0
        self.done: asyncio.Future | None = None
        self.buffer = b""

    # -- transport ---------------------------------------------------------------------

    def write(self, data: bytes) -> None:
        if self.buffer:
            data = self.buffer + data
        n = len(data)
        pos = 0
        unpack = _FRAME.unpack_from
        while n - pos >= 9:
            hi, lo, kind, flags, sid = unpack(data, pos)
            length = (hi << 8) | lo
            end = pos + 9 + length
            if end > n:
                break
            if kind == f.DATA:
                # One response message per DATA frame, as the server writes them.
                if length < 5 or _U32.unpack_from(data, pos + 10)[0] != length - 5:
                    self._fail(f"a DATA frame on stream {sid} is not exactly one gRPC message")
                self.last_reply[sid] = (data, pos + 14, end)
                self.responses += 1
                self.outstanding -= 1
                self.due.append(sid)
                self._read(sid, length)
            elif kind != f.HEADERS:
                self._control(kind, flags, sid, memoryview(data)[pos + 9 : end])
            pos = end
        self.buffer = data[pos:] if pos < n else b""
        if (self.due or self.control) and not self.turn_scheduled:
            self.turn_scheduled = True
            self.loop.call_soon(self._turn)

    def _read(self, sid: int, size: int) -> None:
        """Flow control: grant read bytes back to the server as a grpc client does."""
        self.conn_read += size
        read = self.stream_read[sid] = self.stream_read[sid] + size
        if read >= WINDOW_REFILL:
            self.stream_read[sid] = 0
            self.control.append(f.window_update_frame(sid, read))
        if self.conn_read >= WINDOW_REFILL:
            self.control.append(f.window_update_frame(0, self.conn_read))
            self.conn_read = 0

    def _control(self, kind: int, flags: int, sid: int, payload: memoryview) -> None:
        if kind == f.SETTINGS and not flags & f.ACK:
            self.control.append(f.SETTINGS_ACK)
        elif kind == f.PING and not flags & f.ACK:
            self.control.append(f.ping_frame(bytes(payload), ack=True))
        elif kind == f.RST_STREAM:
            self._fail(f"the server reset stream {sid} (code {f.unpack_u32(payload)})")
        elif kind == f.GOAWAY:
            self._fail(f"the server sent GOAWAY {f.unpack_goaway(payload)}")

    def _fail(self, message: str) -> None:
        if self.done is not None and not self.done.done():
            self.done.set_exception(SystemExit(message))

    def is_closing(self) -> bool:
        return False

    def get_extra_info(self, *args: object) -> None:
        return None

    def close(self) -> None:
        self._fail("the server closed the connection")

    def abort(self) -> None:
        self._fail("the server aborted the connection")

    # -- client ------------------------------------------------------------------------

    def _request(self, sid: int) -> bytes:
        number = self.next_id[sid]
        self.next_id[sid] = number + 1
        messages = self.messages
        if number == len(messages):
            # Every stream sends the same ids in turn: each message is built once.
            payload = self.head + _id_field(str(number)) + self.tail
            messages.append(b"\x00" + len(payload).to_bytes(4, "big") + payload)
        message = messages[number]
        return _FRAME.pack(0, len(message), f.DATA, 0, sid) + message

    def _turn(self) -> None:
        """One socket read's worth of client bytes: owed frames, then the due requests."""
        self.turn_scheduled = False
        out = self.control
        self.control = []
        for sid in self.due:
            if self.budget:
                self.budget -= 1
                self.outstanding += 1
                out.append(self._request(sid))
        self.due.clear()
        if out:
            assert self.protocol is not None
            clock = self.clock
            if clock is not None:
                clock.frozen = time.monotonic_ns()
            try:
                self.protocol.data_received(b"".join(out))
            except Exception as exc:  # noqa: BLE001 - reported by run(), not lost in the loop
                self._fail(f"the server raised {exc!r}")
                return
            finally:
                if clock is not None:
                    clock.frozen = None
        if not self.budget and not self.outstanding and self.done is not None:
            if not self.done.done():
                self.done.set_result(None)

    def open(self, protocol: GrpcProtocol) -> None:
        """The connection preface and the 64 streams' request headers."""
        self.protocol = protocol
        protocol.connection_made(self)  # type: ignore[arg-type]
        encoder = Encoder()
        # The first block adds the headers to the decoder's table; later ones index them.
        blocks = [encoder.encode(_HEADERS) for _ in self.sids]
        opening = [f.PREFACE, f.settings_frame({})]
        opening += [f.frame(f.HEADERS, f.END_HEADERS, s, b) for s, b in zip(self.sids, blocks)]
        protocol.data_received(b"".join(opening))

    async def run(self, requests: int) -> None:
        """``requests`` requests, ``STREAMS`` outstanding, until every one is answered."""
        self.done = self.loop.create_future()
        self.budget = requests
        self.due.extend(self.sids)
        if not self.turn_scheduled:
            self.turn_scheduled = True
            self.loop.call_soon(self._turn)
        await wait_answered(self.done, lambda: self.responses)

    def check_replies(self) -> None:
        """The last response of every stream is a success that echoes its input and id."""
        for sid, (data, start, end) in self.last_reply.items():
            reply = service_pb2.ModelStreamInferResponse.FromString(data[start:end])
            response = reply.infer_response
            problem = ""
            if reply.error_message:
                problem = f"error {reply.error_message!r}"
            elif response.model_name != MODEL or response.id != str(self.next_id[sid] - 1):
                problem = f"model {response.model_name!r} id {response.id!r}"
            elif len(response.outputs) != 1 or list(response.outputs[0].shape) != [1, INPUT.size]:
                problem = f"outputs {list(response.outputs)}"
            elif response.raw_output_contents[0] != INPUT.tobytes():
                problem = "OUTPUT0 differs from INPUT0"
            if problem:
                raise SystemExit(f"stream {sid}: bad response: {problem}")


async def _measure(
    requests: int, profile: bool, wall_clock: bool, manager: ModelManager, service: Service
) -> None:
    loaded = manager.table.get(MODEL)
    clock = None if wall_clock else batcher_on_read_clock(manager)
    peer = _Peer(asyncio.get_running_loop(), clock)
    protocol = GrpcProtocol(_Shared(service, GrpcOptions()))
    peer.open(protocol)
    try:
        await peer.run(WARMUP)
        peer.check_replies()
        before = loaded.scheduler.statistics()
        ok_before = loaded.stats.success.count
        failed_before = loaded.stats.fail.count
        spent = await measured(peer.run(requests), profile)
        after = loaded.scheduler.statistics()
    finally:
        protocol.connection_lost(None)
    ok = loaded.stats.success.count - ok_before
    failed = loaded.stats.fail.count - failed_before
    if ok != requests or failed:
        raise SystemExit(f"{ok} of {requests} requests succeeded ({failed} failed)")
    peer.check_replies()
    batches = after.executions - before.executions
    rows = after.inferences - before.inferences
    print(
        f"{spent / requests * 1e6:.1f} µs CPU per streamed request ({requests} requests, "
        f"{batches} batches, mean batch size {rows / max(batches, 1):.1f})"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=20000)
    parser.add_argument("--profile", action="store_true", help="print a cProfile summary")
    parser.add_argument(
        "--wall-clock",
        action="store_true",
        help="let the batcher read the monotonic clock during reads too: batch sizes then "
        "follow this machine's (or valgrind's) speed and vary from run to run",
    )
    args = parser.parse_args()
    if args.requests < 1:
        parser.error("--requests must be at least 1")
    run_with_model(partial(_measure, args.requests, args.profile, args.wall_clock))


if __name__ == "__main__":
    main()
