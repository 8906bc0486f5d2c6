"""Chaos and soak runs: mixed load on a real server while faults hit it on a schedule.

    python bench/chaos.py                    # 45 s of chaos, table into bench/results/
    python bench/chaos.py --seconds 30       # shorter
    python bench/chaos.py --minutes 30       # soak: also samples resources, plots them

Load (closed loop, one thread per client): HTTP/JSON unary to a dynamically batched model
and to a two-step ensemble, gRPC unary, gRPC streams on a decoupled model (two streams, one
request in flight on each) and gRPC sequences of four steps, all on ``bench/chaos_models``.
Faults, one every ``--fault-interval`` seconds in a fixed rotation (``chaos_faults``):
``kill -9`` of a worker, a reload, an unload + load, a burst past ``max_queue_size``, a
client leaving mid-request and mid-stream, a gRPC deadline that expires.

The run passes when every request got exactly one final answer (success or an error with
a message) within its deadline plus 2 s, every stream ended with its final response, no
answer carried another request's TAG, ``/v2/health/live`` never went unanswered for more
than 100 ms (beyond time the server's loop thread waited for a free core, which the kernel
counts: ``chaos_health``), and every model answers again once the faults stop. A soak adds: each
resource series flat after warm-up (``soak_samples``: the fitted slope within its bound)
and the throughput of the last window within ``--throughput-tolerance`` of the first (in
answers per second while the machine's load average stayed within 1; else in answers per
CPU-second of the server process, which other programs' load does not change).
Exit status 0 when the run passes, 1 when it does not.
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import threading
import time
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path

_ROOT = Path(__file__).resolve().parent.parent
if str(_ROOT) not in sys.path:
    sys.path.insert(0, str(_ROOT))

from bench.chaos_faults import PROCESS_FAULTS, ROTATION, Faults  # noqa: E402
from bench.chaos_ledger import Ledger  # noqa: E402
from bench.chaos_load import GrpcStreams, GrpcUnary, HttpUnary  # noqa: E402
from bench.soak_samples import Sample, plot, sample, throughput, verdict  # noqa: E402
from tritium.testing import ServerProcess, exit_on_signals  # noqa: E402

MODELS = Path(__file__).resolve().parent / "chaos_models"
RESULTS = Path(__file__).resolve().parent / "results"
ALL_MODELS = ("chaos_echo", "chaos_step", "chaos_ens", "chaos_queue", "chaos_stream", "chaos_seq")
HEALTH_LIMIT_MS = 100.0
BOUND_S = 2.0


@dataclass
class Options:
    seconds: float = 45.0
    soak: bool = False
    fault_interval: float = 1.5
    faults: str = "all"  # all | no-process | none
    sample_every: float = 3.0
    warmup_s: float | None = None
    throughput_tolerance: float = 0.10
    results: Path | None = RESULTS
    name: str = "chaos"
    seed: int = 1


@dataclass
class Report:
    options: dict[str, object]
    duration_s: float
    table: list[dict[str, object]]
    faults: dict[str, int]
    health: dict[str, object]
    recovery: dict[str, str]
    violations: list[str]
    notes: dict[str, int]
    error_codes: list[tuple[str, str, int]]
    server_log: dict[str, int]
    soak: dict[str, object] = field(default_factory=dict)
    failures: list[str] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return not self.failures


def _loop(stop: threading.Event, step: object, think_s: float = 0.002) -> threading.Thread:
    def run() -> None:
        while not stop.is_set():
            step()  # type: ignore[operator]
            time.sleep(think_s)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def run(options: Options) -> Report:
    random.seed(options.seed)
    ledger = Ledger(BOUND_S)
    args = ["--model-control-mode=explicit", "--load-model=*", "--exit-timeout-secs=10"]
    with ServerProcess([MODELS], args, grpc=True) as server:
        assert server.proc is not None and server.port is not None
        host, port = "127.0.0.1", server.port
        poller = subprocess.Popen(
            [
                sys.executable,
                str(Path(__file__).with_name("chaos_health.py")),
                host,
                str(port),
                "5",
                str(server.proc.pid),
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        try:
            return _drive(options, ledger, server, poller)
        finally:
            if poller.poll() is None:  # interrupted: the poller goes with the server
                poller.kill()
                poller.wait(10)


def _drive(
    options: Options, ledger: Ledger, server: ServerProcess, poller: subprocess.Popen[str]
) -> Report:
    """The run itself, on a started server with its health poller."""
    assert server.proc is not None and server.port is not None
    host, port = "127.0.0.1", server.port
    began = time.monotonic()
    stop = threading.Event()
    http_a, http_b = HttpUnary(host, port, ledger), HttpUnary(host, port, ledger)
    grpc = GrpcUnary(server.grpc_url, ledger)
    seq = GrpcUnary(server.grpc_url, ledger)
    streams = GrpcStreams(server.grpc_url, ledger)
    streams_b = GrpcStreams(server.grpc_url, ledger)
    corrids = iter(range(1, 1 << 62))
    drivers = [
        _loop(stop, lambda: http_a.call("chaos_echo", random.choice((0, 0, 1, 5)))),
        _loop(stop, lambda: http_b.call("chaos_ens", random.choice((0, 1)))),
        _loop(stop, lambda: grpc.call(random.choice(("chaos_echo", "chaos_ens")), 0)),
        _loop(stop, lambda: streams.send(random.randint(1, 5), random.choice((0, 2)))),
        _loop(stop, lambda: streams_b.send(random.randint(1, 5), random.choice((0, 2)))),
        _loop(stop, lambda: seq.sequence(next(corrids), 4)),
    ]
    kinds = ROTATION
    if options.faults == "no-process":
        kinds = tuple(k for k in ROTATION if k not in PROCESS_FAULTS)
    faults = Faults(host, port, server.grpc_url, server.proc.pid, ledger, kinds, began=began)
    samples: list[Sample] = []
    next_fault = began + options.fault_interval
    next_sample = began
    index = 0
    end = began + options.seconds
    while (now := time.monotonic()) < end:
        if now >= next_sample:
            samples.append(sample(server.proc.pid, began, ledger.ok_total))
            next_sample += options.sample_every
        if options.faults != "none" and now >= next_fault:
            faults.run_one(index)
            index += 1
            next_fault = time.monotonic() + options.fault_interval
        time.sleep(0.05)
    samples.append(sample(server.proc.pid, began, ledger.ok_total))
    # Faults stop; every model is loaded again and must answer.
    for model in ALL_MODELS:
        faults.repository(model, "load")
    recovery = _recovery(grpc, server.grpc_url)
    stop.set()
    for thread in drivers:
        thread.join(30)
    streams.drain(15)
    streams_b.drain(15)
    for client in (http_a, http_b, grpc, seq):
        client.close()
    faults.close()
    ledger.close_out()
    assert poller.stdin is not None
    poller.stdin.close()
    health = json.loads(poller.stdout.readline() or "{}") if poller.stdout else {}
    poller.wait(15)
    duration = time.monotonic() - began
    log = server.log
    report = Report(
        options={k: str(v) for k, v in asdict(options).items()},
        duration_s=round(duration, 1),
        table=ledger.table(),
        faults=dict(faults.done),
        health=health,
        recovery=recovery,
        violations=ledger.violations[:200],
        notes=dict(ledger.notes),
        error_codes=[(c, w, n) for (c, w), n in ledger.error_codes.most_common(12)],
        server_log={
            "lines": log.count("\n") + 1,
            "tracebacks": log.count("Traceback"),
            "restarted": log.count("restarted (pid"),
            "gave_up": log.count("not restarted again"),
        },
    )
    _judge(report, samples, options)
    if options.results is not None:
        _write(report, samples, options, faults.log)
    return report


def _recovery(grpc: GrpcUnary, url: str) -> dict[str, str]:
    """Once the faults stop, each model must answer within 30 s."""
    import tritonclient.grpc as grpcclient

    out = {}
    for model in ("chaos_echo", "chaos_ens", "chaos_queue", "chaos_step"):
        deadline = time.monotonic() + 30
        status = "no answer in 30 s"
        while time.monotonic() < deadline:
            before = grpc.ledger.counts[("grpc/recovery", "ok")]
            grpc.call(model, 0, kind="grpc/recovery")
            if grpc.ledger.counts[("grpc/recovery", "ok")] > before:
                status = "ok"
                break
            time.sleep(0.2)
        out[model] = status
    client = grpcclient.InferenceServerClient(url)
    for model in ("chaos_stream", "chaos_seq"):
        out[model] = "ok" if client.is_model_ready(model) else "not ready"
    client.close()
    return out


def _judge(report: Report, samples: list[Sample], options: Options) -> None:
    failures = report.failures
    if report.violations:
        failures.append(f"{len(report.violations)} request(s) broke the rules")
    # Judged on the stall the server caused: the raw one also holds time the machine had
    # no core for it (see chaos_health); both are in the report.
    stall = report.health.get("max_own_stall_ms")
    if stall is None or float(stall) > HEALTH_LIMIT_MS:  # type: ignore[arg-type]
        failures.append(
            f"/v2/health/live went unanswered for {stall} ms beyond waits for a CPU "
            f"(limit 100 ms; raw {report.health.get('max_stall_ms')} ms)"
        )
    for model, status in report.recovery.items():
        if status != "ok":
            failures.append(f"{model} after the faults: {status}")
    if not options.soak:
        return
    warmup = options.warmup_s if options.warmup_s is not None else min(120.0, options.seconds / 5)
    series = verdict(samples, warmup)
    rates = throughput(samples, warmup, max(30.0, options.seconds / 10))
    start, end = rates["start"], rates["end"]
    change = (end - start) / start if start else 0.0
    per_cpu = rates["start_per_cpu_s"], rates["end_per_cpu_s"]
    cpu_change = (per_cpu[1] - per_cpu[0]) / per_cpu[0] if per_cpu[0] else 0.0
    report.soak = {
        "warmup_s": warmup,
        "samples": len(samples),
        "series": series,
        "throughput_start": round(start, 1),
        "throughput_end": round(end, 1),
        "throughput_change": round(change, 3),
        "per_cpu_s_start": round(per_cpu[0], 1),
        "per_cpu_s_end": round(per_cpu[1], 1),
        "per_cpu_s_change": round(cpu_change, 3),
        "per_client_cpu_s_start": round(rates["start_per_client_cpu_s"], 1),
        "per_client_cpu_s_end": round(rates["end_per_client_cpu_s"], 1),
        "load_start": round(rates["start_load"], 1),
        "load_end": round(rates["end_load"], 1),
    }
    for name, info in series.items():
        if not info["flat"]:
            failures.append(
                f"{name}: the fitted line rises {info['rise']} after warm-up "
                f"(bound {info['bound']}; {info['per_hour']}/h)"
            )
    # Answers per second follow the CPU share the machine leaves the server; answers per
    # CPU-second of the server do not, so they decide when the machine's load changed.
    steady = abs(rates["end_load"] - rates["start_load"]) <= 1.0
    judged = change if steady else cpu_change
    if judged < -options.throughput_tolerance:
        what = "answers/s" if steady else "answers per server CPU-second"
        failures.append(
            f"{what} fell {-judged:.1%} from start to end "
            f"(tolerance {options.throughput_tolerance:.0%}; load average "
            f"{rates['start_load']:.1f} -> {rates['end_load']:.1f})"
        )


def markdown(report: Report) -> str:
    lines = [
        "| kind | sent | ok | error | deadline | abandoned | dropped | longest s |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for row in report.table:
        lines.append(
            "| {kind} | {sent} | {ok} | {error} | {deadline} | {abandoned} | {dropped} | "
            "{longest_s} |".format(**row)
        )
    h = report.health
    lines += [
        "",
        f"faults: {', '.join(f'{k} {v}' for k, v in sorted(report.faults.items()))}",
        f"health: {h.get('probes')} probes, longest unanswered {h.get('max_stall_ms')} ms "
        f"({h.get('max_own_stall_ms')} ms without run-queue waits), p99 {h.get('p99_ms')} ms, "
        f"over 100 ms: {h.get('over_100ms')}",
        f"violations: {len(report.violations)}; recovery: "
        + ", ".join(f"{m} {s}" for m, s in report.recovery.items()),
        f"server log: {report.server_log}",
        f"verdict: {'PASS' if report.passed else 'FAIL: ' + '; '.join(report.failures)}",
    ]
    if report.soak:
        lines += [
            "",
            "| series | after warm-up | last | fitted rise | bound | per hour | flat |",
            "|---|---:|---:|---:|---:|---:|---|",
        ]
        for name, info in report.soak["series"].items():  # type: ignore[union-attr]
            lines.append(
                f"| {name} | {info['first']:.1f} | {info['last']:.1f} | {info['rise']} | "
                f"{info['bound']} | {info['per_hour']} | {'yes' if info['flat'] else 'NO'} |"
            )
        s = report.soak
        lines.append(
            f"\nthroughput: {s['throughput_start']}/s at the start, {s['throughput_end']}/s at "
            f"the end ({float(s['throughput_change']):+.1%}; load average {s['load_start']} -> "  # type: ignore[arg-type]
            f"{s['load_end']}); per server CPU-second: {s['per_cpu_s_start']} -> "
            f"{s['per_cpu_s_end']} ({float(s['per_cpu_s_change']):+.1%}); per CPU-second of "
            f"the load generator: {s.get('per_client_cpu_s_start')} -> "
            f"{s.get('per_client_cpu_s_end')}"
        )
    return "\n".join(lines) + "\n"


def _write(report: Report, samples: list[Sample], options: Options, fault_log: list[str]) -> None:
    assert options.results is not None
    options.results.mkdir(parents=True, exist_ok=True)
    stamp = datetime.now(timezone.utc).strftime("%Y%m%d-%H%M")
    base = options.results / f"{options.name}-{stamp}"
    data = asdict(report)
    data["passed"] = report.passed
    data["fault_log"] = fault_log[-500:]
    data["samples"] = [asdict(s) for s in samples]
    base.with_suffix(".json").write_text(json.dumps(data, indent=1, default=str))
    base.with_suffix(".md").write_text(markdown(report))
    if options.soak:
        title = f"tritium soak, {options.seconds / 60:g} min, faults: {options.faults}"
        plot(samples, float(report.soak["warmup_s"]), base.with_suffix(".png"), title)  # type: ignore[arg-type]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    length = parser.add_mutually_exclusive_group()
    length.add_argument("--seconds", type=float, default=45.0, help="chaos run length")
    length.add_argument("--minutes", type=float, help="soak run length (samples resources)")
    parser.add_argument("--fault-interval", type=float, help="seconds between faults")
    parser.add_argument("--faults", choices=("all", "no-process", "none"), default="all")
    parser.add_argument("--sample-every", type=float, default=3.0)
    parser.add_argument("--warmup", type=float, help="soak warm-up seconds (default 1/5, ≤120)")
    parser.add_argument("--throughput-tolerance", type=float, default=0.10)
    parser.add_argument("--results", type=Path, default=RESULTS)
    parser.add_argument("--seed", type=int, default=1)
    a = parser.parse_args(argv)
    soak = a.minutes is not None
    options = Options(
        seconds=a.minutes * 60 if soak else a.seconds,
        soak=soak,
        fault_interval=a.fault_interval or (5.0 if soak else 1.5),
        faults=a.faults,
        sample_every=a.sample_every,
        warmup_s=a.warmup,
        throughput_tolerance=a.throughput_tolerance,
        results=a.results,
        name="soak" if soak else "chaos",
        seed=a.seed,
    )
    # SIGTERM/SIGHUP (kill, timeout, a cancelled job) unwind like Ctrl-C: the server stops.
    with exit_on_signals():
        report = run(options)
    print(markdown(report))
    for line in report.violations[:30]:
        print("  violation:", line)
    return 0 if report.passed else 1


if __name__ == "__main__":
    sys.exit(main())
