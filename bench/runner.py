"""`bench/run.py`: start both servers, run every scenario interleaved, write and print results."""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import signal
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from types import FrameType
from typing import Any

from bench import run_meta, server_cpu
from bench.anchors import (
    REPO_ROOT,
    Anchors,
    BenchSetupError,
    add_server_options,
    locate_anchors,
)
from bench.checks import CHECKS
from bench.measurement import Measurement
from bench.perf import run_perf_analyzer
from bench.report import (
    SERVERS,
    ScenarioResult,
    baseline_lines,
    markdown_report,
    markdown_table,
    report_json,
)
from bench.scenarios import (
    DEFAULT_SETTINGS,
    QUICK_SETTINGS,
    SCENARIO_NAMES,
    MeasureSettings,
    Scenario,
    select_scenarios,
)
from bench.servers import (
    SHM_DIR,
    Server,
    TritiumServer,
    TritonServer,
    http_get,
    shm_names,
    wait_models_ready,
)
from bench.wrk import run_wrk

DEFAULT_REPOSITORY = REPO_ROOT / "bench" / "model_repository"
DEFAULT_RESULTS = REPO_ROOT / "bench" / "results"


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="bench/run.py",
        description="Benchmark tritium against real Triton on the same model repository with "
        "perf_analyzer and wrk, alternating the servers, and report medians and ratios.",
    )
    p.add_argument(
        "--scenarios",
        nargs="+",
        metavar="NAME",
        help=f"scenarios to run (default: all): {', '.join(SCENARIO_NAMES)}",
    )
    p.add_argument(
        "--rounds", type=int, help="rounds, each running every scenario once (default 3)"
    )
    p.add_argument(
        "--quick", action="store_true", help="smoke test: 1 round, short measurement windows"
    )
    p.add_argument("--repository", type=Path, default=DEFAULT_REPOSITORY)
    add_server_options(p)
    p.add_argument("--results-dir", type=Path, default=DEFAULT_RESULTS)
    p.add_argument(
        "--servers",
        nargs="+",
        choices=SERVERS,
        default=list(SERVERS),
        help="servers to measure (default both; one alone gives no ratios)",
    )
    p.add_argument("--list", action="store_true", help="list the scenarios and exit")
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.list:
        for s in select_scenarios(None):
            print(f"{s.name:28} {s.description}")
        return 0
    try:
        scenarios = select_scenarios(args.scenarios)
        triton_ports = _ports(args.triton_ports)
        anchors = locate_anchors(args.tools_dir, args.anchors)
    except (ValueError, BenchSetupError) as exc:
        print(f"bench: error: {exc}", file=sys.stderr)
        return 2
    settings = QUICK_SETTINGS if args.quick else DEFAULT_SETTINGS
    rounds = args.rounds or (1 if args.quick else 3)
    if rounds < 1:
        print("bench: error: --rounds must be at least 1", file=sys.stderr)
        return 2
    return run_bench(
        anchors,
        scenarios,
        settings,
        rounds,
        repository=args.repository.resolve(),
        triton_ports=triton_ports,
        tritium_port=args.tritium_port,
        tritium_args=tuple(args.tritium_arg),
        results_dir=args.results_dir.resolve(),
        server_names=tuple(n for n in SERVERS if n in args.servers),
    )


def run_bench(
    anchors: Anchors,
    scenarios: list[Scenario],
    settings: MeasureSettings,
    rounds: int,
    *,
    repository: Path,
    triton_ports: tuple[int, int, int],
    tritium_port: int,
    results_dir: Path,
    tritium_args: tuple[str, ...] = (),
    server_names: tuple[str, ...] = SERVERS,
) -> int:
    """Run the benchmark; returns the process exit code (0 ok, 1 failed runs, 2 setup, 130 ^C)."""
    timestamp = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    logs_dir = results_dir / f"{timestamp}-logs"
    logs_dir.mkdir(parents=True, exist_ok=True)
    shm_owned: set[str] = set()
    models = sorted({s.model for s in scenarios})
    results = [ScenarioResult(s) for s in scenarios]
    meta: dict[str, Any] = {
        "timestamp": timestamp,
        "commit": run_meta.commit(),
        "machine": run_meta.machine(),
        "scheduling": run_meta.session_weight(),
        "repository": str(repository),
        "rounds": rounds,
        "setup": run_meta.describe_setup(settings),
        "settings": vars(settings),
        "servers": "",
        "load_average_start": run_meta.load_average(),
    }
    code = 0
    with _terminate_as_interrupt():
        try:
            with contextlib.ExitStack() as stack:
                triton = TritonServer(anchors, repository, triton_ports, logs_dir)
                tritium = TritiumServer(repository, tritium_port, logs_dir, tritium_args)
                every: dict[str, Server] = {"tritium": tritium, "triton": triton}
                servers = {n: every[n] for n in server_names}
                for server in servers.values():
                    # Registered before start so that a half-started server is stopped too.
                    stack.callback(_uninterruptible, server.stop)
                    print(f"[bench] starting {server.name} on {server.url}", flush=True)
                    server.start()
                    wait_models_ready(server.url, models)
                    shm_owned |= _server_shm(server)
                meta["servers"] = run_meta.describe_servers(servers)
                if tritium_args and "tritium" in servers:
                    meta["servers"] += f" (tritium flags: {' '.join(tritium_args)})"
                print(f"[bench] {meta['servers']}", flush=True)
                _run_rounds(
                    results, servers, anchors, settings, rounds, logs_dir, models, shm_owned
                )
        except BenchSetupError as exc:
            print(f"bench: error: {exc}", file=sys.stderr)
            code = 2
        except KeyboardInterrupt:
            print("\n[bench] interrupted; servers stopped", file=sys.stderr)
            meta["interrupted"] = True
            code = 130
    meta["load_average_end"] = run_meta.load_average()
    leaked = sorted(n for n in shm_owned if (SHM_DIR / n).exists())
    if leaked:
        # Provably ours (mapped by a server under test), so they are removed, and reported.
        meta["leaked_shm"] = leaked
        print(f"[bench] warning: servers left /dev/shm entries {leaked}; removing", file=sys.stderr)
        for name in leaked:
            (SHM_DIR / name).unlink(missing_ok=True)
    if any(r.runs[s] for r in results for s in SERVERS):
        _write_results(results_dir, timestamp, meta, results)
    if code == 0 and any(r.errors() for r in results):
        code = 1
    return code


def _run_rounds(
    results: list[ScenarioResult],
    servers: dict[str, Server],
    anchors: Anchors,
    settings: MeasureSettings,
    rounds: int,
    logs_dir: Path,
    models: list[str],
    shm_owned: set[str],
) -> None:
    """Measure round by round: each round runs every scenario, each on every server in turn.

    Throughput on these shared machines drifts over minutes; running all rounds of one
    scenario before the next would let that drift bias comparisons between scenarios (e.g.
    two instances against one), so every round spans them all. `shm_owned` grows with the
    shared-memory regions the servers mapped, also when the run is interrupted.
    """
    measured = []
    for result in results:
        if result.scenario.tool == "wrk" and anchors.wrk is None:
            result.skipped = "wrk not installed"
            print(f"[bench] {result.scenario.name}: skipped (wrk not on PATH)", flush=True)
        else:
            measured.append(result)
    for rnd in range(1, rounds + 1):
        for result, name in round_order(measured, list(servers), rnd):
            scenario = result.scenario
            server = servers[name]
            log_path = logs_dir / f"{scenario.name}-{name}-r{rnd}.log"
            m = _run_once(scenario, server, anchors, settings, logs_dir, models, log_path)
            result.runs[name].append(m)
            print(f"[bench] {scenario.name} round {rnd}/{rounds} {name:8} {_line(m)}", flush=True)
            for each in servers.values():
                shm_owned |= _server_shm(each)


def round_order(
    results: list[ScenarioResult], servers: list[str], rnd: int
) -> list[tuple[ScenarioResult, str]]:
    """The (scenario, server) runs of round `rnd` (from 1), in order.

    Each scenario runs on every server in turn. A scenario whose baseline is in the run
    joins the baseline's place, and each server runs the two back to back, in the listed
    order in odd rounds and reversed in even ones: the pair's paired ratio then compares
    runs seconds apart, and a drift within the pair cancels over two rounds.
    """
    names = {r.scenario.name for r in results}
    blocks: dict[str, list[ScenarioResult]] = {}
    for result in results:
        base = result.scenario.baseline
        key = base if base in names else result.scenario.name
        blocks.setdefault(key, []).append(result)
    order = []
    for block in blocks.values():
        if len(block) > 1 and rnd % 2 == 0:
            block = block[::-1]
        order += [(result, server) for server in servers for result in block]
    return order


def _run_once(
    scenario: Scenario,
    server: Server,
    anchors: Anchors,
    settings: MeasureSettings,
    logs_dir: Path,
    models: list[str],
    log_path: Path,
) -> Measurement:
    """One run of `scenario` on `server`, with the server's CPU and batch sizes over it."""
    _restart_if_dead(server, models, logs_dir)
    url = server.grpc_url if scenario.protocol == "grpc" else server.url
    wrong = _answer_check(scenario, server, "before")
    if wrong is not None:
        return Measurement(error=wrong)
    before = server_cpu.sample(server.pgid, server.url, scenario.model)
    m = _measure(scenario, url, anchors, settings, logs_dir, log_path)
    if not m.ok and not _alive(server):
        # It crashed under this load (Triton 2.51 does in gRPC streaming runs):
        # measure once more on a fresh start, and record that run.
        _restart_if_dead(server, models, logs_dir)
        before = server_cpu.sample(server.pgid, server.url, scenario.model)
        m = _measure(scenario, url, anchors, settings, logs_dir, log_path)
    after = server_cpu.sample(server.pgid, server.url, scenario.model)
    if not m.ok:
        return m
    wrong = _answer_check(scenario, server, "after")
    if wrong is not None:
        return Measurement(error=wrong)
    return replace(
        m,
        server_cpu_us=server_cpu.cpu_us_per_request(before, after),
        server_main_cpu_us=server_cpu.main_cpu_us_per_request(before, after),
        mean_batch_size=server_cpu.mean_batch_size(before, after),
    )


def _answer_check(scenario: Scenario, server: Server, when: str) -> str | None:
    """The scenario's answer check on ``server`` (None when it has none or it passed)."""
    if scenario.answer_check is None:
        return None
    wrong = CHECKS[scenario.answer_check](server.grpc_url)
    if wrong is None:
        print(f"[bench] {scenario.name} {server.name}: answers checked {when} the run", flush=True)
        return None
    return f"answer check {when} the run: {wrong}"


def _alive(server: Server) -> bool:
    """Whether the server answers; a server crashing as a run ends (e.g. while its
    streams close) gets a moment to go down first."""
    time.sleep(0.5)
    return http_get(f"http://{server.url}/v2/health/live")[0] == 200


def _restart_if_dead(server: Server, models: list[str], logs_dir: Path) -> None:
    """Start a server again when it died in an earlier run (its failed runs are already
    recorded), so one crash does not cost it every later scenario."""
    if _alive(server):
        return
    print(f"[bench] {server.name} is not answering; restarting it", flush=True)
    log_file = getattr(server, "log_file", None)
    if isinstance(log_file, Path) and log_file.exists():
        # Keep the log of the crash: the restarted server writes a new one.
        crashes = len(list(logs_dir.glob(f"{log_file.name}.dead-*")))
        log_file.rename(log_file.with_name(f"{log_file.name}.dead-{crashes + 1}"))
    server.stop()
    server.start()
    wait_models_ready(server.url, models)


def _measure(
    scenario: Scenario,
    url: str,
    anchors: Anchors,
    settings: MeasureSettings,
    work_dir: Path,
    log_path: Path,
) -> Measurement:
    if scenario.tool == "wrk":
        assert anchors.wrk is not None
        return run_wrk(anchors.wrk, scenario, url, settings, work_dir, log_path)
    return run_perf_analyzer(anchors.perf_analyzer, scenario, url, settings, work_dir, log_path)


def _line(m: Measurement) -> str:
    if not m.ok:
        return f"ERROR {m.error}"
    cpu = "" if m.server_cpu_us is None else f"  server CPU {m.server_cpu_us:6.0f} µs/infer"
    if cpu and m.server_main_cpu_us is not None:
        cpu += f" (main {m.server_main_cpu_us:.0f})"
    batch = "" if m.mean_batch_size is None else f"  batch {m.mean_batch_size:5.1f}"
    return (
        f"{m.throughput:9.1f} infer/s  p50 {m.p50_us:8.0f} µs  p99 {m.p99_us:8.0f} µs{cpu}{batch}"
    )


def _write_results(
    results_dir: Path, timestamp: str, meta: dict[str, Any], results: list[ScenarioResult]
) -> None:
    json_path = results_dir / f"{timestamp}.json"
    md_path = results_dir / f"{timestamp}.md"
    json_path.write_text(json.dumps(report_json(meta, results), indent=2) + "\n")
    md_path.write_text(markdown_report(meta, results))
    print()
    print(markdown_table(results))
    lines = baseline_lines(results)
    if lines:
        print("\nAgainst a baseline scenario (throughput, median and paired rounds):")
        print("\n".join(lines))
    for r in results:
        for server, rnd, err in r.errors():
            print(f"error: {r.scenario.name} {server} round {rnd}: {err}")
    print(f"\n[bench] wrote {md_path} and {json_path} (tool logs in {timestamp}-logs/)")


@contextlib.contextmanager
def _terminate_as_interrupt() -> Iterator[None]:
    """Treat SIGTERM/SIGHUP like Ctrl-C so that the servers are stopped on every exit path."""

    def handler(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt

    previous = {s: signal.signal(s, handler) for s in (signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        for s, h in previous.items():
            signal.signal(s, h)


def _uninterruptible(stop: Callable[[], None]) -> None:
    """Run `stop` with Ctrl-C and SIGTERM held back, so a second ^C cannot skip the cleanup."""
    held = {signal.SIGINT, signal.SIGTERM, signal.SIGHUP}
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, held)
    try:
        stop()
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


def _ports(text: str) -> tuple[int, int, int]:
    parts = [int(p) for p in text.split(",")]
    if len(parts) != 3:
        raise ValueError(f"--triton-ports needs HTTP,GRPC,METRICS, got {text!r}")
    return parts[0], parts[1], parts[2]


def _server_shm(server: Server) -> set[str]:
    pgid = server.pgid
    return shm_names(pgid) if pgid is not None else set()
