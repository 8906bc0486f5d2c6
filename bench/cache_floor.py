"""How far a Python server can go on a response-cache hit: a floor server beside tritium
and real Triton, under the cache-hit loads.

The floor is the least a Python HTTP server built like tritium's frontend (uvloop,
``httptools``) can do per request: parse it and write back the bytes tritium answered the
same request with, its ``id`` spliced in (perf_analyzer checks it). It decodes nothing
else, keys nothing, looks nothing up and counts only requests (its model statistics grow with them so that perf_analyzer accepts it). Whatever
throughput or CPU per request the floor cannot reach, no Python server on this design can.

Three servers, alternating within every round, ``identity_cached`` with the local cache:

* ``c1``: perf_analyzer HTTP ``--async --input-data zero``, one request in flight (the
  ``identity_cached_http_c1`` scenario);
* ``c64``: wrk, 64 connections (2 threads) posting the same binary request; wrk costs far
  less CPU per request than perf_analyzer, so the servers' own costs show: requests/s and
  the server's CPU per request (its whole process tree, from ``/proc``, over 6 s).

    .venv/bin/python bench/cache_floor.py [--rounds 2] [--anchors /tmp/anchors]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from bench.anchors import add_server_options, locate_anchors  # noqa: E402
from bench.perf import run_perf_analyzer  # noqa: E402
from bench.scenarios import DEFAULT_SETTINGS, SCENARIOS  # noqa: E402
from bench.servers import (  # noqa: E402
    TritiumServer,
    TritonServer,
    group_pids,
    wait_models_ready,
)

MODEL = "identity_cached"
HEADER = (
    b'{"inputs":[{"name":"INPUT0","datatype":"FP32","shape":[1,16],'
    b'"parameters":{"binary_data_size":64}}],'
    b'"outputs":[{"name":"OUTPUT0","parameters":{"binary_data":true}}]}'
)
BODY = HEADER + bytes(64)
WRK_SCRIPT = f"""
wrk.method = "POST"
wrk.path = "/v2/models/{MODEL}/infer"
wrk.body = '{HEADER.decode()}' .. string.rep("\\0", 64)
wrk.headers["Content-Type"] = "application/octet-stream"
wrk.headers["Inference-Header-Content-Length"] = "{len(HEADER)}"
"""
#: The GET documents perf_analyzer reads before it measures, copied from tritium.
DOCUMENTS = ("/v2", f"/v2/models/{MODEL}", f"/v2/models/{MODEL}/config")


# ------------------------------------------------------------------ the floor server


def _http(status: bytes, body: bytes, kind: bytes = b"application/json") -> bytes:
    return (
        b"HTTP/1.1 "
        + status
        + b"\r\nContent-Type: "
        + kind
        + b"\r\nContent-Length: %d\r\n\r\n" % len(body)
        + body
    )


def serve_floor(port: int, canned_dir: Path) -> None:
    """Answer each request with the canned bytes for its path, until killed."""
    import httptools
    import uvloop

    canned = json.loads((canned_dir / "canned.json").read_text())
    answers = {path.encode(): _http(b"200 OK", doc.encode()) for path, doc in canned.items()}
    answers[b"/v2/health/ready"] = _http(b"200 OK", b"")
    # The answer without an id, split as the id is spliced in: "{" + tail of the JSON
    # header, then the binary output.
    head, _, body = (canned_dir / "infer.bin").read_bytes().partition(b"\r\n\r\n")
    json_length = int(
        next(
            line.split(b":", 1)[1]
            for line in head.split(b"\r\n")
            if line.lower().startswith(b"inference-header-content-length:")
        )
    )
    json_tail, binary = body[1:json_length], body[json_length:]

    def infer_answer(request_body: bytes) -> bytes:
        """The canned answer with the request's ``id`` (perf_analyzer checks it)."""
        opening = b"{"
        if request_body.startswith(b'{"id":'):
            end = request_body.index(b",", 6)
            opening = request_body[: end + 1]
        length = len(opening) + len(json_tail)
        return (
            b"HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\n"
            b"Content-Length: %d\r\nInference-Header-Content-Length: %d\r\n\r\n"
            % (length + len(binary), length)
            + opening
            + json_tail
            + binary
        )

    stats_path = f"/v2/models/{MODEL}/stats".encode()
    not_found = _http(b"404 Not Found", b'{"error":"not found"}')
    served = [0]

    def stats() -> bytes:
        n = served[0]
        counted = {"count": n, "ns": n * 1000}
        none = {"count": 0, "ns": 0}
        doc = {
            "model_stats": [
                {
                    "name": MODEL,
                    "version": "1",
                    "last_inference": int(time.time() * 1000),
                    "inference_count": n,
                    "execution_count": n,
                    "inference_stats": {
                        "success": counted,
                        "fail": none,
                        "queue": counted,
                        "compute_input": none,
                        "compute_infer": none,
                        "compute_output": none,
                        "cache_hit": counted,
                        "cache_miss": none,
                    },
                    "batch_stats": [],
                }
            ]
        }
        return _http(b"200 OK", json.dumps(doc).encode())

    class Floor(asyncio.Protocol):
        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            self.transport = transport
            self.parser = httptools.HttpRequestParser(self)
            self.url = b""
            self.body = b""

        def on_url(self, url: bytes) -> None:
            self.url = url

        def on_body(self, body: bytes) -> None:
            self.body += body

        def on_message_complete(self) -> None:
            path = self.url.split(b"?", 1)[0]
            if path.endswith(b"/infer"):
                served[0] += 1
                answer = infer_answer(self.body)
            elif path == stats_path:
                answer = stats()
            else:
                answer = answers.get(path, not_found)
            self.transport.write(answer)  # type: ignore[attr-defined]
            self.body = b""

        def data_received(self, data: bytes) -> None:
            self.parser.feed_data(data)

    async def main() -> None:
        loop = asyncio.get_running_loop()
        server = await loop.create_server(Floor, "127.0.0.1", port, backlog=1024)
        await server.serve_forever()

    uvloop.run(main())


def capture_canned(url: str, canned_dir: Path) -> None:
    """tritium's answers: the GET documents, and the whole HTTP answer to the infer."""
    docs = {}
    for path in DOCUMENTS:
        with urllib.request.urlopen(f"http://{url}{path}", timeout=10) as reply:
            docs[path] = reply.read().decode()
    (canned_dir / "canned.json").write_text(json.dumps(docs))
    import socket

    host, port = url.split(":")
    head = (
        f"POST /v2/models/{MODEL}/infer HTTP/1.1\r\nHost: {url}\r\n"
        "Content-Type: application/octet-stream\r\n"
        f"Inference-Header-Content-Length: {len(HEADER)}\r\n"
        f"Content-Length: {len(BODY)}\r\n\r\n"
    ).encode()
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(head + BODY)
        answer = b""
        while b"\r\n\r\n" not in answer:
            answer += sock.recv(65536)
        head_part, _, rest = answer.partition(b"\r\n\r\n")
        length = int(
            next(
                line.split(b":", 1)[1]
                for line in head_part.split(b"\r\n")
                if line.lower().startswith(b"content-length:")
            )
        )
        while len(rest) < length:
            rest += sock.recv(65536)
    (canned_dir / "infer.bin").write_bytes(head_part + b"\r\n\r\n" + rest[:length])


class FloorServer:
    """The floor in a child process of its own session."""

    name = "floor"

    def __init__(self, port: int, canned_dir: Path) -> None:
        self.port = port
        self.canned_dir = canned_dir
        self.proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def pgid(self) -> int | None:
        return self.proc.pid if self.proc is not None else None

    def start(self) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, __file__, "--serve-floor", str(self.port), str(self.canned_dir)],
            start_new_session=True,
        )
        wait_models_ready(self.url, [])

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait(timeout=10)


# ------------------------------------------------------------------ measuring


def _ticks(pgid: int) -> int:
    total = 0
    for pid in group_pids(pgid):
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])  # utime + stime
    return total


def wrk_c64(wrk: Path, url: str, pgid: int, script: Path) -> tuple[float, float]:
    """(requests/s, server CPU µs per request) over the middle 6 s of a 9 s wrk run."""
    run = subprocess.Popen(
        [str(wrk), "-t2", "-c64", "-d9s", "-s", str(script), f"http://{url}"],
        stdout=subprocess.PIPE,
        text=True,
    )
    time.sleep(2)
    ticks0, clock0 = _ticks(pgid), time.monotonic()
    time.sleep(6)
    ticks1, clock1 = _ticks(pgid), time.monotonic()
    out, _ = run.communicate(timeout=60)
    rate = float(next(line.split()[1] for line in out.splitlines() if "Requests/sec" in line))
    cpu_s = (ticks1 - ticks0) / os.sysconf("SC_CLK_TCK")
    return rate, cpu_s / (rate * (clock1 - clock0)) * 1e6


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--floor-port", type=int, default=18200)
    parser.add_argument("--serve-floor", nargs=2, metavar=("PORT", "DIR"), help=argparse.SUPPRESS)
    add_server_options(parser)
    args = parser.parse_args()
    if args.serve_floor:
        serve_floor(int(args.serve_floor[0]), Path(args.serve_floor[1]))
        return 0

    anchors = locate_anchors(args.tools_dir, args.anchors)
    if anchors.wrk is None:
        print("wrk is not installed", file=sys.stderr)
        return 2
    work = Path(tempfile.mkdtemp(prefix="cache-floor-"))
    script = work / "post.lua"
    script.write_text(WRK_SCRIPT)
    triton_repo = work / "triton"
    triton_repo.mkdir()
    (triton_repo / MODEL).symlink_to(args.anchors / "bench-models" / "triton" / MODEL)
    ports = tuple(int(p) for p in args.triton_ports.split(","))
    tritium = TritiumServer(
        REPO_ROOT / "bench" / "model_repository",
        args.tritium_port,
        work,
        ("--model-control-mode=explicit", f"--load-model={MODEL}", *args.tritium_arg),
    )
    servers = {
        "tritium": tritium,
        "triton": TritonServer(anchors, triton_repo, (ports[0], ports[1], ports[2]), work),
        "floor": FloorServer(args.floor_port, work),
    }
    c1 = next(s for s in SCENARIOS if s.name == "identity_cached_http_c1")
    results: dict[tuple[str, str], list[float]] = {}
    try:
        tritium.start()
        wait_models_ready(tritium.url, [MODEL])
        capture_canned(tritium.url, work)
        servers["triton"].start()
        wait_models_ready(servers["triton"].url, [MODEL])
        servers["floor"].start()
        for round_number in range(1, args.rounds + 1):
            for name, server in servers.items():
                measured = run_perf_analyzer(
                    anchors.perf_analyzer,
                    c1,
                    server.url,
                    DEFAULT_SETTINGS,
                    work,
                    work / f"{name}-c1-{round_number}.log",
                )
                results.setdefault(("c1", name), []).append(measured.throughput or 0.0)
                pgid = server.pgid
                assert pgid is not None
                rate, cpu = wrk_c64(anchors.wrk, server.url, pgid, script)
                results.setdefault(("c64", name), []).append(rate)
                results.setdefault(("cpu", name), []).append(cpu)
                print(
                    f"[round {round_number}] {name:8} c1 {measured.throughput or 0:,.0f}/s"
                    f"{'' if measured.throughput else ' (' + str(measured.error) + ')'}"
                    f"  wrk c64 {rate:,.0f}/s  {cpu:.1f} µs CPU/request",
                    flush=True,
                )
    finally:
        for server in servers.values():
            server.stop()

    def median(key: str, name: str) -> float:
        return statistics.median(results[(key, name)])

    print(
        "\n| server | c1 infer/s | vs Triton | wrk c64 req/s | vs Triton | CPU µs/request | vs Triton |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|")
    for name in servers:
        print(
            f"| {name} | {median('c1', name):,.0f} | {median('c1', name) / median('c1', 'triton'):.2f}× "
            f"| {median('c64', name):,.0f} | {median('c64', name) / median('c64', 'triton'):.2f}× "
            f"| {median('cpu', name):.1f} | {median('cpu', name) / median('cpu', 'triton'):.2f}× |"
        )
    return 0


if __name__ == "__main__":
    from tritium.testing import exit_on_signals

    with exit_on_signals():
        code = main()
    sys.exit(code)
