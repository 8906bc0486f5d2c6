"""Others' added wait while one big, legal request is handled (issue: "one request never
stalls the others").

A probe client asks ``GET /v2/health/live`` over its own keep-alive connection in a tight
loop; one big request is sent meanwhile on another connection. The report gives, per kind
of big request, how long it took and the probe's worst latency during it, next to the
probe's worst latency over a quiet window of the same length (the baseline).

    .venv/bin/python bench/big_requests.py                 # starts tritium itself
    .venv/bin/python bench/big_requests.py --url 127.0.0.1:8000 --grpc-url 127.0.0.1:8001
                                                           # any running server (e.g. Triton)

Run it on a quiet machine: the numbers are latencies of a few milliseconds.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import socket
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import orjson

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples" / "model_repository"


Send = Callable[[], bytes]


def _http(host: str, port: int, head: bytes, body: bytes = b"", chunks: int = 0) -> Send:
    """A prepared request (optionally as ``chunks`` chunked pieces): every byte is built
    before the measurement starts; calling it sends and returns the whole answer."""
    if chunks:
        size = max(1, len(body) // chunks)
        pieces = [body[i : i + size] for i in range(0, len(body), size)]
        wire = (
            head
            + b"Transfer-Encoding: chunked\r\n\r\n"
            + b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in pieces)
            + b"0\r\n\r\n"
        )
    else:
        wire = head + b"Content-Length: %d\r\n\r\n" % len(body) + body

    def send() -> bytes:
        with socket.create_connection((host, port), timeout=600) as sock:
            sock.sendall(wire)
            parts = []
            while chunk := sock.recv(1 << 20):
                parts.append(chunk)
            return b"".join(parts)

    return send


def _infer_head(model: str, extra: str = "") -> bytes:
    return f"POST /v2/models/{model}/infer HTTP/1.1\r\nHost: x\r\nConnection: close\r\n{extra}".encode()


def bytes_4m_empty(host: str, port: int) -> Send:
    count = 4_000_000
    raw = b"\0\0\0\0" * count
    header = orjson.dumps(
        {
            "inputs": [
                {
                    "name": "TEXT",
                    "datatype": "BYTES",
                    "shape": [count],
                    "parameters": {"binary_data_size": len(raw)},
                }
            ],
            "outputs": [{"name": "LENGTH", "parameters": {"binary_data": True}}],
        }
    )
    head = _infer_head("string_upper", f"Inference-Header-Content-Length: {len(header)}\r\n")
    return _http(host, port, head, header + raw)


def json_12m_floats(host: str, port: int) -> Send:
    count = 12_000_000
    body = orjson.dumps(
        {
            "inputs": [
                {
                    "name": "INPUT0",
                    "datatype": "FP32",
                    "shape": [1, count],
                    "data": np.ones(count, np.float32).tolist(),
                }
            ],
            "outputs": [{"name": "OUTPUT0", "parameters": {"binary_data": True}}],
        }
    )
    return _http(host, port, _infer_head("identity"), body)


def json_1m_strings(host: str, port: int) -> Send:
    """1M strings as JSON data (a ~14 MB body): JSON strings are parsed in one piece."""
    count = 1_000_000
    body = orjson.dumps(
        {
            "inputs": [
                {
                    "name": "TEXT",
                    "datatype": "BYTES",
                    "shape": [count],
                    "data": ["hello-tritium"] * count,
                }
            ],
            "outputs": [{"name": "LENGTH", "parameters": {"binary_data": True}}],
        }
    )
    return _http(host, port, _infer_head("string_upper"), body)


def gzip_32mib_response(host: str, port: int) -> Send:
    count = 8 * 2**20
    raw = np.random.default_rng(0).random(count, dtype=np.float32).tobytes()
    header = orjson.dumps(
        {
            "inputs": [
                {
                    "name": "INPUT0",
                    "datatype": "FP32",
                    "shape": [1, count],
                    "parameters": {"binary_data_size": len(raw)},
                }
            ],
            "outputs": [{"name": "OUTPUT0", "parameters": {"binary_data": True}}],
        }
    )
    head = _infer_head(
        "identity",
        f"Inference-Header-Content-Length: {len(header)}\r\nAccept-Encoding: gzip\r\n",
    )
    return _http(host, port, head, header + raw)


def outputs_100k(host: str, port: int) -> Send:
    body = orjson.dumps(
        {
            "inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": [1, 1], "data": [1.0]}],
            "outputs": [{"name": f"OUT{i}"} for i in range(100_000)],
        }
    )
    return _http(host, port, _infer_head("identity"), body)


def chunks_1m(host: str, port: int) -> Send:
    body = orjson.dumps(
        {"inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": [1, 1], "data": [1.0]}]}
    ).ljust(1_000_000, b" ")
    return _http(host, port, _infer_head("identity"), body, chunks=len(body))


def grpc_big_header_block(host: str, port: int) -> Send:
    """A 725 KiB Huffman-coded header block (the size that took Triton 3 ms)."""
    from tritium.frontends.grpc.native import frames as f

    fields = [
        (b":method", b"POST"),
        (b":scheme", b"http"),
        (b":authority", b"x"),
        (b":path", b"/inference.GRPCInferenceService/ServerLive"),
        (b"content-type", b"application/grpc"),
    ]
    # Huffman codes '0' in 5 bits, so eight of them are five zero bytes.
    coded = b"\0" * (725 * 1024)
    big = b"\x10" + f._hpack_int(5, 7, 0) + b"x-big" + f._hpack_int(len(coded), 7, 0x80) + coded
    block = f.header_block(fields) + big
    frames = [f.frame(f.HEADERS, 0, 1, block[:16384])]
    for i in range(16384, len(block), 16384):
        last = i + 16384 >= len(block)
        frames.append(
            f.frame(f.CONTINUATION, f.END_HEADERS if last else 0, 1, block[i : i + 16384])
        )
    wire = f.PREFACE + f.settings_frame({}) + b"".join(frames)

    def send() -> bytes:
        with socket.create_connection((host, port), timeout=600) as sock:
            sock.sendall(wire)
            sock.settimeout(30)
            parts = []
            try:
                while chunk := sock.recv(1 << 16):
                    parts.append(chunk)
            except OSError:
                pass
            return b"".join(parts)

    return send


def grpc_64mib_raw_input(host: str, port: int) -> Send:
    """A 64 MiB tensor in ``raw_input_contents`` over gRPC (the first of its layout, so
    the server parses it with protobuf), answered as 64 MiB."""
    import tritonclient.grpc as grpcclient

    count = 16 * 2**20
    tensor = grpcclient.InferInput("INPUT0", [1, count], "FP32")
    tensor.set_data_from_numpy(np.ones((1, count), np.float32))

    def send() -> bytes:
        client = grpcclient.InferenceServerClient(f"{host}:{port}")
        try:
            result = client.infer("identity", [tensor], client_timeout=600)
            return b"OK %d" % result.as_numpy("OUTPUT0").size
        finally:
            client.close()

    return send


KINDS: dict[str, Callable[[str, int], Send]] = {
    "bytes_4m_empty": bytes_4m_empty,
    "json_12m_floats": json_12m_floats,
    "json_1m_strings": json_1m_strings,
    "gzip_32mib_response": gzip_32mib_response,
    "outputs_100k": outputs_100k,
    "chunks_1m": chunks_1m,
    "grpc_big_header_block": grpc_big_header_block,
    "grpc_64mib_raw_input": grpc_64mib_raw_input,
}


def _probe(host: str, port: int, stop: Any, out: Any) -> None:
    """``GET /v2/health/live`` in a loop on one connection, in a process of its own (so the
    client's own work never delays it); sends back (monotonic end time, latency) pairs."""
    request = b"GET /v2/health/live HTTP/1.1\r\nHost: x\r\n\r\n"
    samples = []
    with socket.create_connection((host, port), timeout=600) as sock:
        while not stop.is_set():
            start = time.monotonic()
            sock.sendall(request)
            data = b""
            while b"\r\n\r\n" not in data:
                data += sock.recv(4096)
            end = time.monotonic()
            samples.append((end, end - start))
            time.sleep(0.001)
    out.send(samples)


def _worst(samples: list[tuple[float, float]], start: float, end: float) -> float:
    return max((lat for t, lat in samples if start <= t <= end), default=0.0)


def measure(host: str, port: int, grpc_port: int, kinds: list[str]) -> dict[str, dict]:
    context = multiprocessing.get_context("spawn")
    stop = context.Event()
    receiver, sender = context.Pipe(duplex=False)
    probe = context.Process(target=_probe, args=(host, port, stop, sender), daemon=True)
    probe.start()
    time.sleep(2.0)
    windows = []
    for kind in kinds:
        send = KINDS[kind](host, grpc_port if kind.startswith("grpc") else port)
        quiet = time.monotonic()
        time.sleep(2.0)
        start = time.monotonic()
        answer = send()
        end = time.monotonic()
        time.sleep(0.5)
        windows.append((kind, quiet, start, end, answer[:60]))
        print(kind, f"took {end - start:.3f} s", flush=True)
    stop.set()
    samples = receiver.recv()
    probe.join(30)
    results = {}
    for kind, quiet, start, end, answer in windows:
        during = _worst(samples, start, end + 0.5)
        baseline = _worst(samples, quiet, start)
        results[kind] = {
            "took_s": round(end - start, 3),
            "answer": answer.decode("latin-1", "replace"),
            "probe_worst_ms": round(during * 1000, 1),
            "probe_worst_quiet_ms": round(baseline * 1000, 1),
            "added_wait_ms": round(max(0.0, during - baseline) * 1000, 1),
        }
        print(kind, json.dumps(results[kind]), flush=True)
    return results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", help="host:port of a running server's HTTP endpoint")
    parser.add_argument("--grpc-url", help="host:port of its gRPC endpoint")
    parser.add_argument("--kinds", nargs="*", default=list(KINDS), choices=list(KINDS))
    parser.add_argument("--out", help="write the results as JSON here")
    args = parser.parse_args()
    server = None
    if args.url is None:
        from tritium.testing import ServerProcess

        server = ServerProcess(
            [EXAMPLES], ["--http-max-input-size=268435456"], grpc=True, startup_timeout=300
        ).start()
        host, port, grpc_port = "127.0.0.1", server.port, server.grpc_port
    else:
        host, _, port_text = args.url.rpartition(":")
        port = int(port_text)
        grpc_port = int(args.grpc_url.rpartition(":")[2]) if args.grpc_url else port + 1
    try:
        results = measure(host, port, grpc_port, args.kinds)
    finally:
        if server is not None:
            server.stop()
    if args.out:
        Path(args.out).write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    from tritium.testing import exit_on_signals

    with exit_on_signals():  # SIGTERM/SIGHUP unwind like Ctrl-C: its servers are stopped
        code = main()
    raise SystemExit(code)
