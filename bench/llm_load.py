"""LLM-serving load tool: time to first token, inter-token latency, tokens/s and requests/s,
with percentiles, a live progress bar and a PNG of the latency distributions.

One run against a running server::

    python bench/llm_load.py run --api openai --url 127.0.0.1:9000 --model tiny_lm -c 16 -n 320

The comparison recorded in bench/README.md (tritium's OpenAI endpoint, generate_stream and
gRPC streaming against real Triton 2.51's generate_stream and gRPC streaming, on the same
decoupled example model, interleaved rounds)::

    python bench/llm_load.py compare --rounds 3

``compare`` serves a copy of ``examples/text_generation/model_repository/tiny_lm`` (its
per-token delay set by ``--delay-ms``) with tritium (``--openai-port``) and with Triton
(started by the shared tools' ``start-triton.sh``; see bench/README.md), then, round by
round, measures every target at each concurrency, alternating servers. It writes
``bench/results/openai/llm_load.json`` (every run) and ``llm_latency.png``, and prints the
table of medians over the rounds.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.llm_clients import APIS, Client, Sample  # noqa: E402

REPO_ROOT = Path(__file__).resolve().parent.parent
EXAMPLE_MODEL = REPO_ROOT / "examples" / "text_generation" / "model_repository" / "tiny_lm"
RESULTS = REPO_ROOT / "bench" / "results" / "openai"
PERCENTILES = (50, 90, 99)


# ------------------------------------------------------------------------- progress


class _Progress:
    """tqdm when installed (the bench extra), else a one-line counter on stderr."""

    def __init__(self, total: int, label: str) -> None:
        self._bar: Any = None
        self._done = 0
        self._total = total
        self._label = label
        self._last = 0.0
        try:
            from tqdm import tqdm

            self._bar = tqdm(total=total, desc=label, unit="req", leave=False, file=sys.stderr)
        except ImportError:
            pass

    def update(self, tokens: int) -> None:
        self._done += 1
        if self._bar is not None:
            self._bar.update(1)
            return
        now = time.monotonic()
        if now - self._last > 0.2 or self._done == self._total:
            self._last = now
            sys.stderr.write(f"\r{self._label}: {self._done}/{self._total} requests")
            sys.stderr.flush()

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
        else:
            sys.stderr.write("\r" + " " * 60 + "\r")


# ------------------------------------------------------------------------- one run


@dataclass
class RunResult:
    target: str
    concurrency: int
    requests: int
    errors: int
    duration_s: float
    tokens: int
    ttft_ms: dict[str, float]
    itl_ms: dict[str, float]
    e2e_ms: dict[str, float]
    tokens_per_s: float
    requests_per_s: float
    #: Raw distributions for the plot (ms).
    ttfts: list[float]
    itls: list[float]


def _percentiles(values: list[float]) -> dict[str, float]:
    if not values:
        return {f"p{p}": float("nan") for p in PERCENTILES} | {"mean": float("nan")}
    array = np.asarray(values)
    found = {f"p{p}": float(np.percentile(array, p)) for p in PERCENTILES}
    found["mean"] = float(array.mean())
    return found


def summarize(target: str, concurrency: int, samples: list[Sample], duration: float) -> RunResult:
    good = [s for s in samples if not s.error and s.token_times]
    ttfts = [s.ttft * 1e3 for s in good]
    itls = [gap * 1e3 for s in good for gap in s.itls]
    tokens = sum(len(s.token_times) for s in good)
    return RunResult(
        target=target,
        concurrency=concurrency,
        requests=len(samples),
        errors=len(samples) - len(good),
        duration_s=duration,
        tokens=tokens,
        ttft_ms=_percentiles(ttfts),
        itl_ms=_percentiles(itls),
        e2e_ms=_percentiles([(s.end - s.start) * 1e3 for s in good]),
        tokens_per_s=tokens / duration if duration else 0.0,
        requests_per_s=len(good) / duration if duration else 0.0,
        ttfts=ttfts,
        itls=itls,
    )


async def run_load(
    api: str,
    url: str,
    model: str,
    *,
    concurrency: int,
    requests: int,
    max_tokens: int,
    warmup: int = 2,
    label: str = "",
) -> RunResult:
    """``requests`` streamed requests from ``concurrency`` users, each sending its next
    request as soon as the last one ended (closed loop)."""
    async with Client(api, url, model, max_tokens) as client:
        users = [await client.user() for _ in range(concurrency)]
        for i in range(warmup):
            await users[i % concurrency](f"warm up request {i}")
        samples: list[Sample] = []
        errors: list[str] = []
        next_index = iter(range(requests))
        progress = _Progress(requests, label or f"{api} c{concurrency}")

        async def loop(send: Any) -> None:
            for i in next_index:
                sample = await send(f"request {i} asks the model about the answer")
                samples.append(sample)
                if sample.error:
                    errors.append(sample.error)
                progress.update(len(sample.token_times))

        start = time.perf_counter()
        await asyncio.gather(*(loop(send) for send in users))
        duration = time.perf_counter() - start
        progress.close()
    if errors:
        print(f"  {len(errors)} failed requests, e.g.: {errors[0]}", file=sys.stderr)
    return summarize(label or api, concurrency, samples, duration)


# ------------------------------------------------------------------------- reporting


def table(results: list[dict[str, Any]]) -> str:
    """Markdown: per target and concurrency, medians over the rounds of each figure."""
    groups: dict[tuple[str, int], list[dict[str, Any]]] = {}
    for r in results:
        groups.setdefault((r["target"], r["concurrency"]), []).append(r)

    def med(rows: list[dict[str, Any]], *path: str) -> float:
        values = []
        for row in rows:
            value: Any = row
            for key in path:
                value = value[key]
            values.append(value)
        return float(np.median(values))

    lines = [
        "| target | c | TTFT p50 ms | TTFT p90 | TTFT p99 | ITL p50 ms | ITL p99 | "
        "tokens/s | req/s | errors |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for (target, c), rows in sorted(groups.items(), key=lambda kv: (kv[0][1], kv[0][0])):
        lines.append(
            f"| {target} | {c} | {med(rows, 'ttft_ms', 'p50'):.2f} | "
            f"{med(rows, 'ttft_ms', 'p90'):.2f} | {med(rows, 'ttft_ms', 'p99'):.2f} | "
            f"{med(rows, 'itl_ms', 'p50'):.2f} | {med(rows, 'itl_ms', 'p99'):.2f} | "
            f"{med(rows, 'tokens_per_s'):,.0f} | {med(rows, 'requests_per_s'):.1f} | "
            f"{sum(r['errors'] for r in rows)} |"
        )
    return "\n".join(lines)


def ratios(results: list[dict[str, Any]]) -> list[str]:
    """The issue's two targets, from the medians over rounds."""

    def median_of(target: str, c: int, *path: str) -> float | None:
        values = []
        for r in results:
            if r["target"] == target and r["concurrency"] == c:
                value: Any = r
                for key in path:
                    value = value[key]
                values.append(value)
        return float(np.median(values)) if values else None

    out = []
    for c in sorted({r["concurrency"] for r in results}):
        openai = median_of("tritium/openai", c, "ttft_ms", "p50")
        grpc = median_of("tritium/grpc_stream", c, "ttft_ms", "p50")
        if openai and grpc:
            out.append(
                f"c{c}: OpenAI TTFT p50 / tritium gRPC streaming TTFT p50 = {openai / grpc:.3f} "
                f"(target <= 1.10)"
            )
        ours = median_of("tritium/generate_stream", c, "tokens_per_s")
        theirs = median_of("triton/generate_stream", c, "tokens_per_s")
        if ours and theirs:
            out.append(
                f"c{c}: tritium / Triton generate_stream tokens/s = {ours / theirs:.2f}x"
                + (" (target >= 1.5x at c16)" if c == 16 else "")
            )
        best = median_of("tritium/openai", c, "tokens_per_s")
        if best and theirs:
            out.append(
                f"c{c}: tritium OpenAI / Triton generate_stream tokens/s = {best / theirs:.2f}x"
            )
    return out


def plot(results: list[dict[str, Any]], path: Path) -> None:
    """Box plots of TTFT and inter-token latency per target, one column per concurrency."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    levels = sorted({r["concurrency"] for r in results})
    targets = sorted({r["target"] for r in results})
    fig, axes = plt.subplots(2, len(levels), figsize=(6 * len(levels), 8), squeeze=False)
    for col, c in enumerate(levels):
        for row, (key, title) in enumerate(
            (("ttfts", "time to first token"), ("itls", "inter-token latency"))
        ):
            data = []
            for target in targets:
                # Tokens read together are 0 ms apart: clipped to 1 µs for the log scale.
                values = [
                    max(v, 1e-3)
                    for r in results
                    if r["target"] == target and r["concurrency"] == c
                    for v in r[key]
                ]
                data.append(values)
            ax = axes[row][col]
            if not any(data):
                ax.set_title(f"{title}, concurrency {c}: no data", fontsize=10)
                continue
            ax.boxplot([d or [float("nan")] for d in data], showfliers=False, whis=(1, 99))
            ax.set_xticks(range(1, len(targets) + 1), targets, rotation=25, ha="right", fontsize=8)
            ax.set_yscale("log")
            ax.set_ylabel("ms")
            ax.set_title(f"{title}, concurrency {c} (whiskers p1-p99)", fontsize=10)
            ax.grid(True, axis="y", alpha=0.3)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


# ------------------------------------------------------------------------- compare


def _model_copy(delay_ms: float) -> Path:
    """A repository holding tiny_lm with ``token_delay_ms`` set to ``delay_ms``."""
    root = Path(tempfile.mkdtemp(prefix="llm-load-")) / "models"
    target = root / "tiny_lm"
    shutil.copytree(EXAMPLE_MODEL, target, ignore=shutil.ignore_patterns("__pycache__"))
    config = target / "config.pbtxt"
    text = config.read_text()
    old = 'key: "token_delay_ms" value: { string_value: "20" }'
    assert old in text, "tiny_lm's config changed: update llm_load._model_copy"
    config.write_text(
        text.replace(old, f'key: "token_delay_ms" value: {{ string_value: "{delay_ms:g}" }}')
    )
    return root


def compare(args: argparse.Namespace) -> int:
    from bench.anchors import default_prefix, default_tools_dir, locate_anchors
    from bench.servers import TritonServer, wait_models_ready
    from tritium.testing import ServerProcess

    repository = _model_copy(args.delay_ms)
    run_dir = repository.parent / "run"
    run_dir.mkdir()
    port = args.tritium_port
    tritium = ServerProcess(
        [repository],
        [
            "--allow-metrics=false",
            f"--http-port={port}",
            f"--grpc-port={port + 1}",
            f"--openai-port={port + 2}",
        ],
        grpc=True,
        openai=True,
    )
    triton = None
    if not args.tritium_only:
        anchors = locate_anchors(default_tools_dir(), default_prefix(), install=False)
        triton = TritonServer(anchors, repository, tuple(args.triton_ports), run_dir)
    targets = [
        ("tritium/openai", "openai", f"127.0.0.1:{port + 2}"),
        ("tritium/generate_stream", "generate_stream", f"127.0.0.1:{port}"),
        ("tritium/grpc_stream", "grpc_stream", f"127.0.0.1:{port + 1}"),
    ]
    if triton is not None:
        targets += [
            ("triton/generate_stream", "generate_stream", triton.url),
            ("triton/grpc_stream", "grpc_stream", triton.grpc_url),
        ]
    results: list[dict[str, Any]] = []
    try:
        tritium.start()
        if triton is not None:
            triton.start()
            wait_models_ready(triton.url, ["tiny_lm"])
        for round_number in range(1, args.rounds + 1):
            for c in args.concurrency:
                # Alternate the order each round so that drifts hit every target alike.
                order = targets if round_number % 2 else list(reversed(targets))
                for name, api, url in order:
                    requests = max(args.requests_per_user * c, c)
                    result = asyncio.run(
                        run_load(
                            api,
                            url,
                            "tiny_lm",
                            concurrency=c,
                            requests=requests,
                            max_tokens=args.max_tokens,
                            label=f"r{round_number} {name} c{c}",
                        )
                    )
                    row = asdict(result) | {"target": name, "round": round_number}
                    results.append(row)
                    print(
                        f"round {round_number} {name:24s} c{c:<3d} TTFT p50 "
                        f"{result.ttft_ms['p50']:7.2f} ms  ITL p50 {result.itl_ms['p50']:6.2f} ms  "
                        f"{result.tokens_per_s:8,.0f} tok/s  {result.requests_per_s:6.1f} req/s"
                        + (f"  errors {result.errors}" if result.errors else ""),
                        flush=True,
                    )
    finally:
        tritium.stop()
        if triton is not None:
            triton.stop()
        shutil.rmtree(repository.parent, ignore_errors=True)
    out = Path(args.results_dir)
    out.mkdir(parents=True, exist_ok=True)
    meta = {
        "delay_ms": args.delay_ms,
        "max_tokens": args.max_tokens,
        "rounds": args.rounds,
        "concurrency": args.concurrency,
        "requests_per_user": args.requests_per_user,
        "name": args.name,
        "when": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
    }
    slim = [{k: v for k, v in r.items() if k not in ("ttfts", "itls")} for r in results]
    (out / f"llm_load-{args.name}.json").write_text(
        json.dumps({"meta": meta, "runs": slim}, indent=1)
    )
    plot(results, out / f"llm_latency-{args.name}.png")
    print()
    print(table(results))
    print()
    for line in ratios(results):
        print(line)
    return 0


# ------------------------------------------------------------------------- CLI


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    one = sub.add_parser("run", help="one load run against a running server")
    one.add_argument("--api", choices=APIS, default="openai")
    one.add_argument("--url", required=True, help="host:port of the API's endpoint")
    one.add_argument("--model", default="tiny_lm")
    one.add_argument("-c", "--concurrency", type=int, default=1)
    one.add_argument("-n", "--requests", type=int, default=50)
    one.add_argument("--max-tokens", type=int, default=64)
    one.add_argument("--plot", type=Path, help="write the latency PNG here")
    both = sub.add_parser("compare", help="tritium against real Triton, interleaved rounds")
    both.add_argument("--rounds", type=int, default=3)
    both.add_argument("--concurrency", type=int, nargs="+", default=[1, 16])
    both.add_argument("--requests-per-user", type=int, default=20)
    both.add_argument("--max-tokens", type=int, default=64)
    both.add_argument("--delay-ms", type=float, default=5.0, help="tiny_lm's pause per token")
    both.add_argument("--tritium-port", type=int, default=18300, help="HTTP; +1 gRPC, +2 OpenAI")
    both.add_argument("--triton-ports", type=int, nargs=3, default=[18310, 18311, 18312])
    both.add_argument("--tritium-only", action="store_true", help="skip real Triton")
    both.add_argument("--results-dir", default=str(RESULTS))
    both.add_argument(
        "--name",
        default="paced",
        help="names the outputs: llm_load-NAME.json, llm_latency-NAME.png",
    )
    args = parser.parse_args(argv)
    try:
        import uvloop

        uvloop.install()
    except ImportError:
        pass
    if args.command == "compare":
        return compare(args)
    result = asyncio.run(
        run_load(
            args.api,
            args.url,
            args.model,
            concurrency=args.concurrency,
            requests=args.requests,
            max_tokens=args.max_tokens,
        )
    )
    row = asdict(result)
    print(table([row]))
    if args.plot:
        plot([row], args.plot)
    return 0 if not result.errors else 1


if __name__ == "__main__":
    from tritium.testing import exit_on_signals

    with exit_on_signals():  # SIGTERM/SIGHUP unwind like Ctrl-C: its servers are stopped
        code = main()
    raise SystemExit(code)
