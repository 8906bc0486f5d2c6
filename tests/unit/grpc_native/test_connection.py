"""The sans-IO HTTP/2 server connection, driven by the independent ``h2`` client."""

from __future__ import annotations

import h2.config
import h2.connection
import h2.events
import pytest
from hpack import Encoder
from hyperframe.frame import Frame, GoAwayFrame, RstStreamFrame

from tritium.frontends.grpc.native import frames as f
from tritium.frontends.grpc.native.connection import H2Connection, Stream

REQUEST = [
    (":method", "POST"),
    (":scheme", "http"),
    (":path", "/inference.GRPCInferenceService/ModelInfer"),
    (":authority", "localhost"),
    ("content-type", "application/grpc"),
    ("te", "trailers"),
]


class Receiver:
    def __init__(self, stream: Stream, headers: list[tuple[str, str]]) -> None:
        self.stream = stream
        self.headers = headers
        self.data = bytearray()
        self.ended = False
        self.reset = False

    def on_data(self, data, end_stream):
        self.data += data
        self.ended |= end_stream

    def on_reset(self):
        self.reset = True


class Recorder:
    def __init__(self) -> None:
        self.calls: list[Receiver] = []

    def stream_opened(self, stream, headers):
        self.calls.append(Receiver(stream, list(headers)))
        return self.calls[-1]


class Pair:
    """Our server connection and an h2 client, wired back to back."""

    def __init__(self, client_settings: dict | None = None, **server_options) -> None:
        self.handler = Recorder()
        self.clock = [0.0]
        self.server = H2Connection(self.handler, clock=lambda: self.clock[0], **server_options)
        self.server.initiate()
        config = h2.config.H2Configuration(client_side=True, header_encoding="utf-8")
        self.client = h2.connection.H2Connection(config)
        self.client.initiate_connection()
        if client_settings:
            self.client.update_settings(client_settings)
        self.events = self.pump()

    def pump(self) -> list:
        events = []
        for _ in range(100):
            out = self.client.data_to_send()
            if out:
                self.server.receive(out)
            back = self.server.data_to_send()
            if not out and not back:
                break
            if back:
                events += self.client.receive_data(back)
        return events

    def raw(self, data: bytes) -> list[Frame]:
        """Feed raw bytes to the server and parse what it answers."""
        self.server.receive(data)
        return _frames(self.server.data_to_send())


def _frames(data: bytes) -> list[Frame]:
    out = []
    while data:
        frame, length = Frame.parse_frame_header(memoryview(data[:9]))
        frame.parse_body(memoryview(data[9 : 9 + length]))
        out.append(frame)
        data = data[9 + length :]
    return out


def _of(events, kind):
    return [e for e in events if isinstance(e, kind)]


def test_settings_are_exchanged_and_acknowledged():
    pair = Pair()
    changed = _of(pair.events, h2.events.RemoteSettingsChanged)[0].changed_settings
    assert changed[f.SETTINGS_MAX_CONCURRENT_STREAMS].new_value == 1024
    assert changed[f.SETTINGS_INITIAL_WINDOW_SIZE].new_value == pair.server.local_window
    assert _of(pair.events, h2.events.SettingsAcknowledged)  # ours acknowledged theirs
    window = _of(pair.events, h2.events.WindowUpdated)
    assert window and window[0].stream_id == 0


def test_request_and_whole_response_in_one_buffer():
    pair = Pair()
    pair.client.send_headers(1, REQUEST + [("x-user", "u1")])
    pair.client.send_data(1, b"\x00\x00\x00\x00\x03abc", end_stream=True)
    pair.pump()
    call = pair.handler.calls[0]
    assert ("x-user", "u1") in call.headers and bytes(call.data) == b"\x00\x00\x00\x00\x03abc"
    assert call.ended
    head = f.header_block([(b":status", b"200"), (b"content-type", b"application/grpc")])
    pair.server.send_response(
        call.stream, head, b"\x00\x00\x00\x00\x02", b"ok", f.header_block([(b"grpc-status", b"0")])
    )
    assert len(pair.server.out) == 1  # headers, data and trailers in one write
    events = pair.pump()
    assert _of(events, h2.events.ResponseReceived)[0].headers[0] == (":status", "200")
    assert (
        b"".join(e.data for e in _of(events, h2.events.DataReceived)) == b"\x00\x00\x00\x00\x02ok"
    )
    assert _of(events, h2.events.TrailersReceived)[0].headers == [("grpc-status", "0")]
    assert _of(events, h2.events.StreamEnded)
    assert not pair.server.streams


def test_response_waits_for_window_updates_and_trailers_come_last():
    pair = Pair(client_settings={f.SETTINGS_INITIAL_WINDOW_SIZE: 1000})
    pair.client.send_headers(1, REQUEST, end_stream=True)
    pair.pump()
    stream = pair.handler.calls[0].stream
    body = bytes(range(256)) * 40  # 10 240 bytes
    pair.server.send_response(stream, b"\x88", b"", body, f.header_block([(b"grpc-status", b"0")]))
    events = pair.pump()
    got = _of(events, h2.events.DataReceived)
    assert sum(len(e.data) for e in got) == 1000  # the stream window, no more
    assert not _of(events, h2.events.TrailersReceived)
    received = bytearray(b"".join(e.data for e in got))
    for _ in range(20):
        for e in got:
            pair.client.acknowledge_received_data(e.flow_controlled_length, 1)
        events = pair.pump()
        got = _of(events, h2.events.DataReceived)
        received += b"".join(e.data for e in got)
        if _of(events, h2.events.TrailersReceived):
            break
    assert bytes(received) == body
    assert _of(events, h2.events.StreamEnded)


def test_replies_queued_behind_a_closed_window_are_bounded(monkeypatch):
    from tritium.frontends.grpc.native import sending

    monkeypatch.setattr(sending, "MAX_QUEUED_BYTES", 4096)
    pair = Pair(client_settings={f.SETTINGS_INITIAL_WINDOW_SIZE: 1000})
    pair.client.send_headers(1, REQUEST)  # a stream the client keeps open
    pair.pump()
    stream = pair.handler.calls[0].stream
    pair.server.send_headers(stream, b"\x88")
    accepted = 0
    while pair.server.send_message(stream, 0, b"m" * 995):  # 1000 bytes with the prefix
        accepted += 1
        assert accepted < 100, "queued replies are not bounded"
    # The window took the first message; five more queued reach the bound (4096 bytes),
    # so the seventh is refused.
    assert accepted == 6
    events = pair.pump()
    reset = _of(events, h2.events.StreamReset)
    assert reset and reset[0].error_code == f.ENHANCE_YOUR_CALM
    assert not stream.pending and not pair.server.streams
    # One message larger than the bound on its own is still sent whole.
    pair.client.send_headers(3, REQUEST)
    pair.pump()
    big = pair.handler.calls[1].stream
    assert pair.server.send_message(big, 0, b"b" * 10_000)


def test_large_request_replenishes_windows():
    pair = Pair()
    pair.client.send_headers(1, REQUEST)
    payload = b"z" * (3 * pair.server.local_window)
    sent = 0
    while sent < len(payload):
        window = min(pair.client.local_flow_control_window(1), pair.client.max_outbound_frame_size)
        assert window > 0, "the server stopped opening its windows"
        chunk = payload[sent : sent + window]
        sent += len(chunk)
        pair.client.send_data(1, chunk, end_stream=sent == len(payload))
        pair.pump()
    assert len(pair.handler.calls[0].data) == len(payload) and pair.handler.calls[0].ended


def test_headers_split_over_continuation_frames():
    pair = Pair()
    big = [(f"x-meta-{i}", "v" * 2000) for i in range(12)]  # > 16 KiB: HEADERS + CONTINUATION
    pair.client.send_headers(1, REQUEST + big, end_stream=True)
    pair.pump()
    assert pair.handler.calls[0].headers[-12:] == big


def test_padding_priority_and_unknown_frames_are_tolerated():
    pair = Pair()
    pair.client.send_headers(1, REQUEST, priority_weight=200)
    pair.client.send_data(1, b"abc", pad_length=10, end_stream=True)
    pair.server.receive(pair.client.data_to_send())
    assert pair.raw(f.frame(0xFA, 0, 0, b"whatever") + f.frame(f.PRIORITY, 0, 1, b"\0" * 5)) == []
    call = pair.handler.calls[0]
    assert bytes(call.data) == b"abc" and call.ended and not pair.server.closed


def test_client_reset_reaches_the_call():
    pair = Pair()
    pair.client.send_headers(1, REQUEST)
    pair.pump()
    pair.client.reset_stream(1)
    pair.pump()
    assert pair.handler.calls[0].reset and not pair.server.streams


def test_excess_streams_are_refused():
    pair = Pair(max_concurrent_streams=2)
    encoder = Encoder()
    answers = []
    for sid in (1, 3, 5):
        block = encoder.encode(REQUEST)
        answers += pair.raw(f.headers_frames(sid, block, False, 16_384))
    assert [(type(a), a.stream_id, a.error_code) for a in answers] == [
        (RstStreamFrame, 5, f.REFUSED_STREAM)
    ]
    assert len(pair.handler.calls) == 2


def _goaway(frames) -> GoAwayFrame:
    goaways = [fr for fr in frames if isinstance(fr, GoAwayFrame)]
    assert goaways, frames
    return goaways[0]


@pytest.mark.parametrize(
    ("data", "code"),
    [
        (f.frame(f.DATA, 0, 0, b"x"), f.PROTOCOL_ERROR),  # DATA on stream 0
        (f.frame(f.DATA, 0, 7, b"x"), f.PROTOCOL_ERROR),  # DATA on an idle stream
        (f.frame(f.HEADERS, f.END_HEADERS, 1, b"\xff\xff\xff\xff"), f.COMPRESSION_ERROR),
        (f.frame(f.HEADERS, f.END_HEADERS, 2, b"\x82"), f.PROTOCOL_ERROR),  # even stream id
        (f.frame(f.SETTINGS, 0, 0, b"\0" * 5), f.FRAME_SIZE_ERROR),
        (f.frame(f.SETTINGS, 0, 0, b"\0\x05\0\0\0\x01"), f.PROTOCOL_ERROR),  # max frame 1
        (f.frame(f.PING, 0, 0, b"short"), f.FRAME_SIZE_ERROR),
        (f.window_update_frame(0, 0), f.PROTOCOL_ERROR),
        (f.window_update_frame(0, 2**31 - 1), f.FLOW_CONTROL_ERROR),
        (f.frame(f.CONTINUATION, f.END_HEADERS, 1, b"\x82"), f.PROTOCOL_ERROR),
        (f.frame(f.PUSH_PROMISE, 0, 1, b"\0\0\0\x02"), f.PROTOCOL_ERROR),
        (f.frame_header(20_000, f.DATA, 0, 1) + b"\0" * 20_000, f.FRAME_SIZE_ERROR),
        (f.frame(f.DATA, f.PADDED, 1, b"\x09abc"), f.PROTOCOL_ERROR),  # pad > payload
    ],
)
def test_protocol_errors_answer_goaway(data, code):
    pair = Pair()
    if data[3] in (f.DATA,) and int.from_bytes(data[5:9], "big") == 1:
        pair.client.send_headers(1, REQUEST)  # stream 1 open for the DATA cases
        pair.pump()
    frames = pair.raw(data)
    assert _goaway(frames).error_code == code
    assert pair.server.closed
    assert pair.server.data_to_send() == b""
    pair.server.receive(b"anything after is ignored")
    assert pair.server.data_to_send() == b""


def test_bad_preface_is_a_connection_error():
    server = H2Connection(Recorder())
    server.receive(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
    assert server.closed and _goaway(_frames(server.data_to_send())).error_code == f.PROTOCOL_ERROR


def test_open_streams_are_reset_by_a_connection_error():
    pair = Pair()
    pair.client.send_headers(1, REQUEST)
    pair.pump()
    pair.raw(f.frame(f.DATA, 0, 0, b"x"))
    assert pair.handler.calls[0].reset


def test_ping_is_answered_and_abuse_is_stopped():
    pair = Pair(min_ping_interval=10.0, max_ping_strikes=2)
    acks = []
    for i in range(3):
        pair.clock[0] += 1.0
        acks += [fr for fr in pair.raw(f.ping_frame(b"%08d" % i)) if "ACK" in fr.flags]
    assert [a.opaque_data for a in acks] == [b"00000000", b"00000001", b"00000002"]
    # Without calls, a client may ping once in two hours: the third strike closes.
    pair.clock[0] += 1.0
    frames = pair.raw(f.ping_frame(b"abcdefgh"))
    assert _goaway(frames).error_code == f.ENHANCE_YOUR_CALM
    assert _goaway(frames).additional_data == b"too_many_pings"


def test_pings_after_sending_data_are_not_strikes():
    pair = Pair(min_ping_interval=10.0, max_ping_strikes=1)
    for sid in range(1, 12, 2):
        pair.clock[0] += 0.1
        pair.raw(f.ping_frame(b"12345678"))
        pair.client.send_headers(sid, REQUEST, end_stream=True)
        pair.pump()
        stream = pair.handler.calls[-1].stream
        pair.server.send_headers(stream, b"\x88", end_stream=True)  # resets the strike count
        pair.pump()
    assert not pair.server.closed


def test_hpack_cache_follows_the_dynamic_table():
    pair = Pair()
    encoder = Encoder()

    def request(sid, value):
        block = encoder.encode(REQUEST + [("x-id", value)])
        pair.raw(f.headers_frames(sid, block, True, 16_384))
        return dict(pair.handler.calls[-1].headers)["x-id"]

    assert request(1, "a") == "a"
    assert request(3, "a") == "a"  # fully indexed block: served from the cache
    assert request(5, "b") == "b"
    # Hand-made: index 62 is the newest dynamic entry, whatever it holds now.
    indexed = b"\x83\x86\x84\xbe"  # POST, http, path "/", dynamic 62
    pair.raw(f.headers_frames(7, indexed, True, 16_384))
    first = pair.handler.calls[-1].headers[-1]
    encoder.encode([("x-other", "zzz")])  # keep our copy of the table in step
    pair.raw(
        f.headers_frames(9, b"\x83\x86\x84\x40\x07x-other\x03zzz", True, 16_384)
    )  # inserts x-other: zzz at 62
    pair.raw(f.headers_frames(11, indexed, True, 16_384))
    assert first == ("x-id", "b")
    assert pair.handler.calls[-1].headers[-1] == ("x-other", "zzz")


def test_a_response_in_parts_is_framed_where_it_lies():
    # A big infer answer is never joined: its parts (views of the output memory) are
    # framed within the windows and handed to the transport as they are.
    pair = Pair(client_settings={f.SETTINGS_INITIAL_WINDOW_SIZE: 2**31 - 1})
    pair.client.increment_flow_control_window(2**30)
    pair.client.send_headers(1, REQUEST, end_stream=True)
    pair.pump()
    stream = pair.handler.calls[0].stream
    body = bytearray(range(256)) * 4096  # 1 MiB
    parts = [b"\0\0\x10\0\0", memoryview(body)[:300_000], memoryview(body)[300_000:]]
    pair.server.send_response_parts(
        stream, b"\x88", parts, f.header_block([(b"grpc-status", b"0")])
    )
    assert pair.server.out_big
    out = pair.server.take_output()
    assert not pair.server.out and not pair.server.out_big
    views = [part for part in out if isinstance(part, memoryview) and part.obj is body]
    assert sum(map(len, views)) == len(body)  # all of it, not copied
    events = pair.client.receive_data(b"".join(out))
    received = b"".join(e.data for e in _of(events, h2.events.DataReceived))
    assert received == bytes(parts[0]) + body
    assert _of(events, h2.events.TrailersReceived) and _of(events, h2.events.StreamEnded)


def test_small_responses_are_still_joined_into_one_write():
    pair = Pair()
    pair.client.send_headers(1, REQUEST, end_stream=True)
    pair.pump()
    stream = pair.handler.calls[0].stream
    pair.server.send_response_parts(
        stream, b"\x88", [b"\0\0\0\0\3", b"abc"], f.header_block([(b"grpc-status", b"0")])
    )
    assert not pair.server.out_big
    assert type(pair.server.data_to_send()) is bytes
