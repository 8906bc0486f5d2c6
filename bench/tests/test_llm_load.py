"""The LLM load tool without servers under test: its SSE client against a local chunked
SSE server (tokens counted, keep-alive reused, errors kept), the summary's figures, the
table and the targets' ratios, and the plot."""

from __future__ import annotations

import asyncio
import http.server
from pathlib import Path

import pytest
from bench.llm_clients import Sample
from bench.llm_load import plot, ratios, run_load, summarize, table
from bench.tests.local_http import serving

EVENTS = [
    b'data: {"choices":[{"index":0,"text":" a","finish_reason":null}]}\n\n',
    b'data: {"choices":[{"index":0,"text":" b","finish_reason":null}]}\n\n',
    b'data: {"choices":[{"index":0,"text":"","finish_reason":"length"}]}\n\n',
    b"data: [DONE]\n\n",
]


class _Sse(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    connections: set[int] = set()

    def do_POST(self) -> None:  # noqa: N802 - http.server's naming
        self.rfile.read(int(self.headers["Content-Length"]))
        _Sse.connections.add(id(self.connection))
        if self.path != "/v1/completions":
            self.send_response(404)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        # The first two events in one chunk, the rest one per chunk.
        for chunk in (EVENTS[0] + EVENTS[1], *EVENTS[2:]):
            self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
        self.wfile.write(b"0\r\n\r\n")

    def log_message(self, *args: object) -> None:
        pass


def test_the_sse_client_counts_tokens_on_one_kept_connection() -> None:
    _Sse.connections.clear()
    with serving(_Sse) as url:
        result = asyncio.run(
            run_load("openai", url, "m", concurrency=1, requests=5, max_tokens=2, warmup=1)
        )
    assert (result.requests, result.errors, result.tokens) == (5, 0, 10)
    assert len(result.ttfts) == 5 and len(result.itls) == 5
    assert len(_Sse.connections) == 1


def test_a_failed_request_is_counted_as_an_error() -> None:
    with serving(_Sse) as url:
        result = asyncio.run(
            run_load("generate_stream", url, "m", concurrency=2, requests=4, max_tokens=2, warmup=0)
        )
    assert (result.requests, result.errors, result.tokens) == (4, 4, 0)


def _sample(start: float, times: list[float]) -> Sample:
    return Sample(start, times, end=times[-1] if times else start)


def test_summary_figures() -> None:
    samples = [
        _sample(0.0, [0.010, 0.015, 0.020]),
        _sample(0.0, [0.030, 0.040]),
        Sample(0.0, error="x"),
    ]
    result = summarize("t", 2, samples, duration=0.5)
    assert result.tokens == 5 and result.errors == 1
    assert result.tokens_per_s == 10.0 and result.requests_per_s == 4.0
    assert result.ttft_ms["p50"] == 20.0
    assert sorted(round(v, 3) for v in result.itls) == [5.0, 5.0, 10.0]


def test_table_ratios_and_plot(tmp_path: Path) -> None:
    def row(target: str, c: int, ttft: float, tps: float) -> dict:
        result = summarize(target, c, [_sample(0.0, [ttft / 1e3, ttft / 1e3 + 0.005])], 1.0)
        data = result.__dict__ | {"tokens_per_s": tps}
        return data

    rows = [
        row("tritium/openai", 16, 10.0, 300.0),
        row("tritium/grpc_stream", 16, 10.0, 300.0),
        row("tritium/generate_stream", 16, 10.0, 300.0),
        row("triton/generate_stream", 16, 12.0, 150.0),
    ]
    text = table(rows)
    assert text.count("\n") == 5 and "| tritium/openai | 16 | 10.00 |" in text
    lines = ratios(rows)
    assert "OpenAI TTFT p50 / tritium gRPC streaming TTFT p50 = 1.000" in lines[0]
    assert "tritium / Triton generate_stream tokens/s = 2.00x" in lines[1]
    pytest.importorskip("matplotlib")  # the bench extra
    plot(rows, tmp_path / "plot.png")
    assert (tmp_path / "plot.png").read_bytes().startswith(b"\x89PNG")
