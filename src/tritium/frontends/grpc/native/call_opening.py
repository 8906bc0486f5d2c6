"""Opening a native gRPC call on a new HTTP/2 stream: its request headers checked (method,
content type, size, restrictions, encodings, deadline), memoized per connection for
repeated header blocks, and the call started or the stream answered at once.
"""

from __future__ import annotations

from tritium.frontends.grpc.calls import METHODS, Method
from tritium.frontends.grpc.native import grpc_wire as w
from tritium.frontends.grpc.native.call import GrpcCall
from tritium.frontends.grpc.native.call_host import CallHost
from tritium.frontends.grpc.native.connection import Stream
from tritium.frontends.restricted import RestrictedApis, Restriction, grpc_method_group

_TRANSPORT_HEADERS = frozenset(
    ("content-type", "te", "grpc-timeout", "grpc-encoding", "grpc-accept-encoding")
)


class _Refused:
    """Receiver of a stream answered at once (bad headers): ignores what follows."""

    __slots__ = ()

    def on_data(self, data: memoryview, end_stream: bool) -> None:
        pass

    def on_reset(self) -> None:
        pass


REFUSED = _Refused()


#: A checked request header list: (method, metadata, grpc-encoding, response encoding,
#: grpc-timeout) for a call to start, or the header block that refuses the stream.
_Checked = tuple[Method, dict[str, str], "str | None", "str | None", "str | None"] | bytes

#: Checked header lists kept per connection (the connection hands out the same list
#: object for a repeated header block, so repeated calls are checked once).
MAX_CHECKED = 64


def open_call(
    proto: CallHost, stream: Stream, headers: list[tuple[str, str]]
) -> GrpcCall | _Refused:
    """Check a new stream's request headers and start its call (or answer at once)."""
    memo = proto.checked_headers
    entry = memo.get(id(headers))
    if entry is not None and entry[0] is headers:
        checked = entry[1]
    else:
        checked = _check_headers(proto, headers)
        if len(memo) >= MAX_CHECKED:
            memo.clear()
        # The entry holds the list, so its id cannot be reused while it is kept.
        memo[id(headers)] = (headers, checked)
    if type(checked) is bytes:
        proto.conn.send_headers(stream, checked, end_stream=True)
        return REFUSED
    method, metadata, encoding, out_encoding, timeout = checked  # type: ignore[misc]
    call = GrpcCall(proto, stream, method, metadata, encoding, out_encoding)
    if timeout is not None:
        seconds = w.parse_timeout(timeout)
        if seconds is not None:
            call.timer = proto.loop.call_later(seconds, call.expire)
    return call


def _check_headers(proto: CallHost, headers: list[tuple[str, str]]) -> _Checked:
    path = method_name = content_type = timeout = encoding = accept = None
    metadata: dict[str, str] = {}
    size = 0
    for name, value in headers:
        size += len(name) + len(value) + 32
        if name[0] == ":":
            if name == ":path":
                path = value
            elif name == ":method":
                method_name = value
        elif name in _TRANSPORT_HEADERS:
            if name == "content-type":
                content_type = value
            elif name == "grpc-timeout":
                timeout = value
            elif name == "grpc-encoding":
                encoding = value
            elif name == "grpc-accept-encoding":
                accept = value
        else:
            metadata[name] = value
    if method_name != "POST":
        return w.http_error(405, w.INTERNAL, "gRPC requires POST")
    if content_type is None or not (
        content_type == "application/grpc"
        or content_type.startswith(("application/grpc+", "application/grpc;"))
    ):
        return w.http_error(415, w.UNKNOWN, f"invalid gRPC request content-type '{content_type}'")
    if size > proto.conn.max_header_list_size:
        return w.trailers_only(w.RESOURCE_EXHAUSTED, "request header list too large")
    method = METHODS.get(path or "")
    if method is None:
        return w.trailers_only(w.UNIMPLEMENTED, f"Method not found: {path}")
    restriction = proto.restricted_paths.get(method.path)
    if restriction is not None and not restriction.allows(metadata.get(restriction.header)):
        return w.trailers_only(w.UNAVAILABLE, restriction.grpc_message())
    if encoding == "identity":
        encoding = None
    elif encoding is not None and encoding not in w.ENCODINGS:
        return w.trailers_only(
            w.UNIMPLEMENTED, f"Compression algorithm '{encoding}' is not supported"
        )
    out_encoding = w.response_encoding(accept, proto.response_compression) if method.infer else None
    return method, metadata, encoding, out_encoding, timeout


def restricted_paths(restricted: RestrictedApis) -> dict[str, Restriction]:
    """:path → restriction, for the methods whose group ``restricted`` restricts."""
    found = {}
    for path, method in METHODS.items():
        restriction = restricted.for_group(grpc_method_group(method.name))
        if restriction is not None:
            found[path] = restriction
    return found
