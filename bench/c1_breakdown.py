"""Where one concurrency-1 request's time goes, measured, for tritium (polling off and on)
and real Triton side by side.

One client (the real ``perf_analyzer``, concurrency 1) sends requests back to back. Over a
fixed window (after a warm-up), for each server:

- **round trip**: the window over the requests answered (at concurrency 1 that is the mean
  latency the client sees, its own time included);
- from the server's statistics extension (the same numbers on both servers): **in server**
  = mean request duration (from the request's arrival at the scheduler to its response),
  split into **queue** (arrival until its batch is handed to the model instance), the
  instance's **compute input / infer / output** (measured inside the worker / stub), and
  the rest: **hand-offs** = in server − queue − compute, the crossing to the instance and
  back (messages, wake-ups); **outside** = round trip − in server: the client, both TCP
  crossings, and the frontend's decoding before arrival and encoding after the response;
- from ``/proc``, per process of the server: CPU (user + system) per request and
  **sleeps** per request (voluntary context switches: each is a wake-up someone pays for).

Variants are measured round by round, alternating, so drift hits them alike:

    .venv/bin/python bench/c1_breakdown.py                          # add_sub over HTTP
    .venv/bin/python bench/c1_breakdown.py --protocol grpc --rounds 5
    .venv/bin/python bench/c1_breakdown.py --variants tritium-nopoll tritium

``tritium-nopoll`` is tritium with ``--busy-poll-us=0 --busy-poll-linger-us=0
--busy-poll-worker-us=0`` (every process sleeps while it waits, as before polling existed).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from bench.anchors import default_prefix, default_tools_dir, locate_anchors  # noqa: E402
from bench.servers import group_pids, http_get  # noqa: E402
from tritium.testing import ServerProcess  # noqa: E402

REPOSITORY = REPO_ROOT / "bench" / "model_repository"
NO_POLL = ("--busy-poll-us=0", "--busy-poll-linger-us=0", "--busy-poll-worker-us=0")
_TICKS = os.sysconf("SC_CLK_TCK")


@contextmanager
def tritium(model: str, extra: tuple[str, ...]) -> Iterator[tuple[str, str, int]]:
    args = ("--model-control-mode=explicit", f"--load-model={model}", "--allow-metrics=false")
    with ServerProcess([REPOSITORY], (*args, *extra), grpc=True) as server:
        assert server.proc is not None
        yield server.http_url, server.grpc_url, server.proc.pid


@contextmanager
def triton(model: str) -> Iterator[tuple[str, str, int]]:
    anchors = locate_anchors(default_tools_dir(), default_prefix())
    run_dir = Path(tempfile.mkdtemp(prefix="bench-c1-"))
    pid_file = run_dir / "triton.pid"
    env = {**os.environ, "PID_FILE": str(pid_file), "LOG_FILE": str(run_dir / "log")}
    ports = ("18000", "18001", "18002")
    start = ["bash", str(anchors.start_triton), str(anchors.prefix), str(REPOSITORY), *ports]
    flags = ["--model-control-mode=explicit", f"--load-model={model}", "--allow-metrics=false"]
    subprocess.run([*start, *flags], env=env, check=True, capture_output=True, text=True)
    try:
        yield "127.0.0.1:18000", "127.0.0.1:18001", int(pid_file.read_text())
    finally:
        subprocess.run(["bash", str(anchors.stop_server), str(pid_file)], capture_output=True)


def _stats(url: str, model: str) -> dict[str, tuple[int, int]]:
    status, body = http_get(f"http://{url}/v2/models/{model}/stats")
    if status != 200:
        raise RuntimeError(f"statistics of {model}: HTTP {status}")
    stats = json.loads(body)["model_stats"][0]["inference_stats"]
    return {k: (int(v["count"]), int(v["ns"])) for k, v in stats.items()}


def _processes(pid: int) -> dict[int, tuple[str, int, int, int]]:
    """pid -> (name, user ticks, system ticks, voluntary switches of all its threads) of
    the server's tree."""
    out = {}
    for p in group_pids(os.getpgid(pid)):
        try:
            stat = Path(f"/proc/{p}/stat").read_text()
            switches = sum(
                int(task.read_text().split("\nvoluntary_ctxt_switches:")[1].split()[0])
                for task in Path(f"/proc/{p}/task").glob("*/status")
            )
        except (OSError, IndexError):
            continue
        fields = stat.rsplit(")", 1)[1].split()
        name = "main" if p == pid else f"instance {p}"
        out[p] = (name, int(fields[11]), int(fields[12]), switches)
    return out


def measure(urls: tuple[str, str, int], model: str, protocol: str, seconds: float) -> dict:
    http_url, grpc_url, pid = urls
    client = [
        str(locate_anchors(default_tools_dir(), default_prefix()).perf_analyzer),
        "-m", model, "-u", http_url if protocol == "http" else grpc_url, "-i", protocol,
        "--concurrency-range", "1:1", "--measurement-interval", "600000",
        "--max-trials", "1", "--stability-percentage", "999",
    ]  # fmt: skip
    load = subprocess.Popen(client, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        time.sleep(1.5)  # warm-up
        s0, p0, t0 = _stats(http_url, model), _processes(pid), time.monotonic()
        time.sleep(seconds)
        s1, p1, t1 = _stats(http_url, model), _processes(pid), time.monotonic()
    finally:
        load.kill()
        load.wait()
    n = s1["success"][0] - s0["success"][0]
    if n <= 0:
        raise RuntimeError("no request was answered in the window")

    def mean_us(key: str, per: str = "success") -> float:
        count = s1[per][0] - s0[per][0] if per != "success" else n
        return (s1[key][1] - s0[key][1]) / max(count, 1) / 1000

    compute = {k: mean_us(k, k) for k in ("compute_input", "compute_infer", "compute_output")}
    in_server = mean_us("success")
    queue = mean_us("queue", "queue")
    row = {
        "infer_per_s": n / (t1 - t0),
        "round_trip_us": (t1 - t0) / n * 1e6,
        "in_server_us": in_server,
        "queue_us": queue,
        **{f"{k}_us": v for k, v in compute.items()},
        "hand_offs_us": in_server - queue - sum(compute.values()),
    }
    row["outside_us"] = row["round_trip_us"] - in_server
    procs = []
    for p, (name, user, system, switches) in sorted(p1.items()):
        if p not in p0:
            continue
        _, user0, system0, switches0 = p0[p]
        cpu = ((user - user0) + (system - system0)) / _TICKS / n * 1e6
        if cpu > 0.5 or p == pid:
            procs.append({"process": name, "cpu_us": cpu, "sleeps": (switches - switches0) / n})
    row["processes"] = procs
    return row


VARIANTS = {
    "tritium-nopoll": lambda model: tritium(model, NO_POLL),
    "tritium": lambda model: tritium(model, ()),
    "triton": triton,
}
COLUMNS = [
    ("infer/s", "infer_per_s", "{:,.0f}"),
    ("round trip µs", "round_trip_us", "{:.0f}"),
    ("outside µs", "outside_us", "{:.0f}"),
    ("in server µs", "in_server_us", "{:.0f}"),
    ("queue µs", "queue_us", "{:.0f}"),
    ("input µs", "compute_input_us", "{:.0f}"),
    ("infer µs", "compute_infer_us", "{:.0f}"),
    ("output µs", "compute_output_us", "{:.0f}"),
    ("hand-offs µs", "hand_offs_us", "{:.0f}"),
]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="add_sub")
    parser.add_argument("--json", type=Path, help="also write every round's numbers here")
    parser.add_argument("--protocol", choices=("http", "grpc"), default="http")
    parser.add_argument("--seconds", type=float, default=4.0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=list(VARIANTS))
    args = parser.parse_args(argv)
    results: dict[str, list[dict]] = {v: [] for v in args.variants}
    with ExitStack() as stack:
        servers = {v: stack.enter_context(VARIANTS[v](args.model)) for v in args.variants}
        for r in range(args.rounds):
            order = args.variants if r % 2 == 0 else args.variants[::-1]
            for variant in order:
                row = measure(servers[variant], args.model, args.protocol, args.seconds)
                results[variant].append(row)
                print(f"round {r + 1} {variant}: {row['infer_per_s']:,.0f} infer/s", flush=True)
    if args.json is not None:
        args.json.write_text(json.dumps(results, indent=1))
    print(f"\n{args.model}, {args.protocol}, concurrency 1, medians of {args.rounds} rounds:\n")
    print("| server | " + " | ".join(c[0] for c in COLUMNS) + " | CPU µs/request (sleeps) |")
    print("|---" * (len(COLUMNS) + 2) + "|")
    for variant, rows in results.items():
        cells = [fmt.format(statistics.median(r[key] for r in rows)) for _, key, fmt in COLUMNS]
        last = rows[len(rows) // 2]["processes"]
        cpu = ", ".join(f"{p['process']} {p['cpu_us']:.0f} ({p['sleeps']:.2f})" for p in last)
        print(f"| {variant} | " + " | ".join(cells) + f" | {cpu} |")
    return 0


if __name__ == "__main__":
    from tritium.testing import exit_on_signals

    with exit_on_signals():  # SIGTERM/SIGHUP unwind like Ctrl-C: its servers are stopped
        code = main()
    sys.exit(code)
