"""A rolling update under load, behind a real load balancer: how many requests fail?

Two (``--replicas``) tritium processes serve ``add_sub`` behind HAProxy (Debian's
``haproxy``; config written here), which health-checks ``/v2/health/ready`` every
``--check-ms`` and takes a server out after two failed checks. HTTP goes through an HTTP
frontend, gRPC through an HTTP/2 frontend and ``proto h2`` servers. HAProxy retries
nothing (``retries 0``), like a Kubernetes Service: a request sent to a replica that
refuses it fails.

While ``perf_analyzer`` (HTTP and gRPC at once) and a plain tritonclient loop per protocol
load the balancer, each replica is replaced in turn as a Kubernetes Deployment with
``maxSurge: 1, maxUnavailable: 0`` does: start a new process, wait until it is ready and
HAProxy has it up, then SIGTERM the old one and wait for it to exit. Run once with
``--drain-delay-secs=3`` (zero failed requests) and once with 0 (the failures the drain
window prevents)::

    python -m bench.rolling_update --drain-delay-secs=3 --out bench/results/rolling_update.md
    python -m bench.rolling_update --drain-delay-secs=0 --out bench/results/rolling_update.md

Failures are counted three ways: the client loops count every failed call; perf_analyzer
stops with an error on the first failed request; HAProxy's counters give every response
that was not a 2xx and every request it could not forward. Loopback addresses only.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
REPOSITORY = ROOT / "examples" / "model_repository"
MODEL = "add_sub"
PERF_ANALYZER = Path("/tmp/anchors/bin/perf_analyzer")
HOST = "127.0.0.1"
_NO_PROXY = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def free_ports(count: int, start: int) -> list[int]:
    """``count`` loopback ports below 32768 that nothing listens on now."""
    ports: list[int] = []
    port = start
    while len(ports) < count and port < 32768:
        with socket.socket() as sock:
            try:
                sock.bind((HOST, port))
                ports.append(port)
            except OSError:
                pass
        port += 1
    if len(ports) < count:
        raise RuntimeError("not enough free ports")
    return ports


@dataclass
class Replica:
    """One tritium process in one load-balancer slot."""

    slot: int
    http_port: int
    grpc_port: int
    drain_delay_s: int
    log_path: Path
    proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        args = [
            sys.executable, "-m", "tritium", "serve",
            f"--model-repository={REPOSITORY}",
            "--model-control-mode=explicit", f"--load-model={MODEL}",
            f"--http-address={HOST}", f"--http-port={self.http_port}",
            f"--grpc-address={HOST}", f"--grpc-port={self.grpc_port}",
            "--allow-metrics=false", f"--drain-delay-secs={self.drain_delay_s}",
        ]  # fmt: skip
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(
                args, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )

    def ready(self) -> bool:
        url = f"http://{HOST}:{self.http_port}/v2/health/ready"
        try:
            with _NO_PROXY.open(url, timeout=2) as reply:
                return reply.status == 200
        except OSError:
            return False

    def wait_ready(self, timeout: float = 120.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.proc is not None
            if self.proc.poll() is not None:
                raise RuntimeError(f"replica exited: see {self.log_path}")
            if self.ready():
                return
            time.sleep(0.1)
        raise RuntimeError(f"replica not ready after {timeout:.0f} s: see {self.log_path}")

    def stop(self, timeout: float = 60.0) -> tuple[int, float]:
        """SIGTERM and wait; (exit status, seconds from the signal to the exit)."""
        assert self.proc is not None
        started = time.monotonic()
        self.proc.send_signal(signal.SIGTERM)
        code = self.proc.wait(timeout)
        return code, time.monotonic() - started

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)


class HaProxy:
    """HAProxy in front of every slot, with a stats socket to read server states."""

    def __init__(self, workdir: Path, slots: list[tuple[int, int]], ports: tuple[int, int],
                 check_ms: int) -> None:  # fmt: skip
        self.socket_path = workdir / "haproxy.sock"
        self.config = workdir / "haproxy.cfg"
        self.http_port, self.grpc_port = ports
        http_servers = "\n".join(
            f"    server s{i} {HOST}:{h} check" for i, (h, _) in enumerate(slots)
        )
        grpc_servers = "\n".join(
            f"    server s{i} {HOST}:{g} proto h2 check port {h} check-proto h1"
            for i, (h, g) in enumerate(slots)
        )
        self.config.write_text(f"""global
    stats socket {self.socket_path} mode 600 level admin
    maxconn 4096

defaults
    mode http
    timeout connect 2s
    timeout client 60s
    timeout server 60s
    retries 0
    option httpchk GET /v2/health/ready
    http-check expect status 200
    default-server inter {check_ms}ms fastinter {check_ms}ms downinter {check_ms}ms rise 2 fall 2

frontend http_in
    bind {HOST}:{self.http_port}
    default_backend http_servers

frontend grpc_in
    bind {HOST}:{self.grpc_port} proto h2
    default_backend grpc_servers

backend http_servers
    balance roundrobin
{http_servers}

backend grpc_servers
    balance roundrobin
{grpc_servers}
""")
        self.proc: subprocess.Popen[bytes] | None = None
        self.log_path = workdir / "haproxy.log"

    def start(self) -> None:
        haproxy = shutil.which("haproxy") or "/usr/sbin/haproxy"
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(
                [haproxy, "-db", "-f", str(self.config)],
                stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
            )  # fmt: skip
        deadline = time.monotonic() + 10
        while not self.socket_path.exists() and time.monotonic() < deadline:
            time.sleep(0.05)

    def command(self, text: str) -> str:
        with socket.socket(socket.AF_UNIX) as sock:
            sock.connect(str(self.socket_path))
            sock.sendall(text.encode() + b"\n")
            chunks = []
            while chunk := sock.recv(65536):
                chunks.append(chunk)
        return b"".join(chunks).decode()

    def stats(self) -> list[dict[str, str]]:
        text = self.command("show stat").lstrip("# ")
        return list(csv.DictReader(io.StringIO(text)))

    def states(self) -> dict[tuple[str, str], str]:
        return {(r["pxname"], r["svname"]): r["status"] for r in self.stats()}

    def wait_states(self, want: dict[int, str], timeout: float = 30.0) -> None:
        """Until every slot in ``want`` is UP/DOWN in both backends."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            states = self.states()
            if all(
                states.get((backend, f"s{slot}"), "").startswith(state)
                for slot, state in want.items()
                for backend in ("http_servers", "grpc_servers")
            ):
                return
            time.sleep(0.05)
        raise RuntimeError(f"HAProxy states not {want} after {timeout:.0f} s: {self.states()}")

    def counters(self) -> dict[str, dict[str, int]]:
        keep = ("req_tot", "hrsp_1xx", "hrsp_2xx", "hrsp_3xx", "hrsp_4xx", "hrsp_5xx",
                "hrsp_other", "ereq", "dreq", "econ", "eresp", "wretr", "wredis")  # fmt: skip
        out = {}
        for row in self.stats():
            if row["svname"] in ("FRONTEND", "BACKEND"):
                name = f"{row['pxname']}/{row['svname']}"
                out[name] = {k: int(row[k] or 0) for k in keep if k in row}
        return out

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(10)


@dataclass
class LoopCount:
    """One protocol's plain client loop: every call counted."""

    protocol: str
    ok: int = 0
    failed: int = 0
    errors: list[str] = field(default_factory=list)


def client_loop(protocol: str, url: str, stop: threading.Event, count: LoopCount) -> None:
    """Sequential add_sub calls through the balancer until ``stop``; one client (kept
    connections, as applications do), checked answers."""
    if protocol == "http":
        import tritonclient.http as client_module
    else:
        import tritonclient.grpc as client_module  # type: ignore[no-redef]
    a = np.arange(4, dtype=np.float32)
    b = np.ones(4, dtype=np.float32)
    inputs = [client_module.InferInput("INPUT0", [4], "FP32"),
              client_module.InferInput("INPUT1", [4], "FP32")]  # fmt: skip
    inputs[0].set_data_from_numpy(a)
    inputs[1].set_data_from_numpy(b)
    client = client_module.InferenceServerClient(url)
    while not stop.is_set():
        try:
            result = client.infer(MODEL, inputs)
            if not np.array_equal(result.as_numpy("OUTPUT0"), a + b):
                raise ValueError("wrong OUTPUT0")
            count.ok += 1
        except Exception as exc:  # noqa: BLE001 - every failure is counted
            count.failed += 1
            if len(count.errors) < 5:
                count.errors.append(f"{type(exc).__name__}: {exc}"[:300])
    client.close()


def start_perf_analyzer(protocol: str, url: str, window_ms: int, concurrency: int,
                        log_path: Path) -> subprocess.Popen[bytes]:  # fmt: skip
    """perf_analyzer for three windows of ``window_ms`` (a stability bound it always
    meets, so it measures exactly three windows: the whole update falls inside them)."""
    args = [str(PERF_ANALYZER), "-m", MODEL, "-x", "1", "-u", url, "-i", protocol,
            f"--concurrency-range={concurrency}", f"--measurement-interval={window_ms}",
            "-s", "1000", "-r", "3"]  # fmt: skip
    with open(log_path, "wb") as log:
        return subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT)


def perf_summary(code: int, text: str) -> dict[str, Any]:
    errors = [line.strip() for line in text.splitlines() if re.search(r"error|fail", line, re.I)]
    throughput = re.search(r"Concurrency: \d+, throughput: ([\d.]+) infer/sec", text)
    return {
        "exit_status": code,
        "error_lines": errors[:5],
        "throughput_infer_per_s": float(throughput.group(1)) if throughput else None,
    }


def run(args: argparse.Namespace) -> dict[str, Any]:
    workdir = Path(tempfile.mkdtemp(prefix="tritium-rolling-"))
    n = args.replicas
    ports = free_ports(2 * (n + 1) + 2, args.base_port)
    slots = [(ports[2 * i], ports[2 * i + 1]) for i in range(n + 1)]
    lb = HaProxy(workdir, slots, (ports[-2], ports[-1]), args.check_ms)
    replicas: dict[int, Replica] = {}
    generation = 0

    def new_replica(slot: int) -> Replica:
        nonlocal generation
        generation += 1
        h, g = slots[slot]
        log = workdir / f"tritium-{generation}-slot{slot}.log"
        replica = Replica(slot, h, g, args.drain_delay_secs, log)
        replica.start()
        return replica

    steps: list[dict[str, Any]] = []
    stop = threading.Event()
    loops = [LoopCount("http"), LoopCount("grpc")]
    threads: list[threading.Thread] = []
    perfs: dict[str, subprocess.Popen[bytes]] = {}
    try:
        for slot in range(n):
            replicas[slot] = new_replica(slot)
        for replica in replicas.values():
            replica.wait_ready()
        lb.start()
        lb.wait_states({**{s: "UP" for s in range(n)}, n: "DOWN"})
        urls = {"http": f"{HOST}:{lb.http_port}", "grpc": f"{HOST}:{lb.grpc_port}"}
        load_started = time.monotonic()
        for protocol in ("http", "grpc"):
            perfs[protocol] = start_perf_analyzer(
                protocol, urls[protocol], args.window_ms, args.concurrency,
                workdir / f"perf_analyzer-{protocol}.log",
            )  # fmt: skip
        for count in loops:
            thread = threading.Thread(
                target=client_loop, args=(count.protocol, urls[count.protocol], stop, count)
            )
            thread.start()
            threads.append(thread)
        time.sleep(args.warmup_s)
        update_started = time.monotonic()
        for old_slot in list(replicas):
            free = next(s for s in range(n + 1) if s not in replicas)
            t0 = time.monotonic()
            replica = new_replica(free)
            replica.wait_ready()
            lb.wait_states({free: "UP"})
            up_s = time.monotonic() - t0
            old = replicas.pop(old_slot)
            replicas[free] = replica
            code, drain_s = old.stop()
            steps.append({"replaced_slot": old_slot, "new_slot": free, "new_up_s": round(up_s, 2),
                          "old_exit_status": code, "old_stop_s": round(drain_s, 2)})  # fmt: skip
        update_s = time.monotonic() - update_started
        time.sleep(args.warmup_s)
        stop.set()
        for thread in threads:
            thread.join(60)
        perf_results = {}
        for protocol, proc in perfs.items():
            code = proc.wait(args.window_ms / 1000 * 6 + 120)
            text = (workdir / f"perf_analyzer-{protocol}.log").read_text(errors="replace")
            perf_results[protocol] = perf_summary(code, text)
        load_s = time.monotonic() - load_started
        counters = lb.counters()
    finally:
        stop.set()
        for proc in perfs.values():
            if proc.poll() is None:
                proc.kill()
        for replica in replicas.values():
            try:
                replica.stop()
            except Exception:  # noqa: BLE001 - killed below
                pass
            replica.kill()
        lb.stop()
    frontends = {k: v for k, v in counters.items() if k.endswith("/FRONTEND")}
    lb_failed = sum(
        c["hrsp_4xx"] + c["hrsp_5xx"] + c.get("hrsp_other", 0) + c["ereq"]
        for c in frontends.values()
    )
    return {
        "drain_delay_secs": args.drain_delay_secs,
        "replicas": n,
        "check_ms": args.check_ms,
        "update_s": round(update_s, 1),
        "load_s": round(load_s, 1),
        "steps": steps,
        "perf_analyzer": perf_results,
        "client_loops": {c.protocol: {"ok": c.ok, "failed": c.failed, "errors": c.errors}
                         for c in loops},  # fmt: skip
        "haproxy": counters,
        "haproxy_failed_responses": lb_failed,
        "workdir": str(workdir),
    }


def markdown(result: dict[str, Any]) -> str:
    loops = result["client_loops"]
    perf = result["perf_analyzer"]
    fe = result["haproxy"]
    lines = [
        f"### `--drain-delay-secs={result['drain_delay_secs']}` "
        f"({result['replicas']} replicas, checks every {result['check_ms']} ms)",
        "",
        f"Rolling update of every replica: {result['update_s']} s, under load for "
        f"{result['load_s']} s.",
        "",
        "| Protocol | perf_analyzer exit | perf_analyzer infer/s | perf_analyzer error lines "
        "| client loop ok | client loop failed | HAProxy requests | HAProxy non-2xx + errors |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for protocol, frontend in (("http", "http_in"), ("grpc", "grpc_in")):
        c = fe.get(f"{frontend}/FRONTEND", {})
        bad = c.get("hrsp_4xx", 0) + c.get("hrsp_5xx", 0) + c.get("hrsp_other", 0) + c.get(
            "ereq", 0
        )
        p = perf[protocol]
        lines.append(
            f"| {protocol} | {p['exit_status']} | {p['throughput_infer_per_s'] or 'aborted'} "
            f"| {len(p['error_lines'])} | {loops[protocol]['ok']} | {loops[protocol]['failed']} "
            f"| {c.get('req_tot', 0)} | {bad} |"
        )
    lines.append("")
    for step in result["steps"]:
        lines.append(
            f"- slot {step['replaced_slot']} → {step['new_slot']}: new replica up in HAProxy "
            f"after {step['new_up_s']} s; old one exited {step['old_exit_status']} "
            f"{step['old_stop_s']} s after SIGTERM"
        )
    shown = [e for p in perf.values() for e in p["error_lines"][:2]]
    shown += [e for c in loops.values() for e in c["errors"][:2]]
    if shown:
        shown = [" ".join(e.split()) for e in shown[:6]]
        lines += ["", "First errors seen:", ""] + [f"- `{e}`" for e in shown]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--replicas", type=int, default=2)
    parser.add_argument("--drain-delay-secs", type=int, default=3)
    parser.add_argument("--check-ms", type=int, default=500, help="HAProxy check interval")
    parser.add_argument("--concurrency", type=int, default=2, help="perf_analyzer, each")
    parser.add_argument("--window-ms", type=int, default=15000, help="perf_analyzer window")
    parser.add_argument("--warmup-s", type=float, default=3.0)
    parser.add_argument("--base-port", type=int, default=24100)
    parser.add_argument("--out", type=Path, help="append the result (Markdown) to this file")
    parser.add_argument("--json", type=Path, help="write the full result as JSON")
    args = parser.parse_args(argv)
    if not PERF_ANALYZER.exists():
        print(f"error: {PERF_ANALYZER} is missing (bench/README.md: reference tools)")
        return 2
    if shutil.which("haproxy") is None and not Path("/usr/sbin/haproxy").exists():
        print("error: haproxy is missing (apt-get install haproxy)")
        return 2
    result = run(args)
    text = markdown(result)
    print(text)
    if args.out is not None:
        with open(args.out, "a") as f:
            f.write(text + "\n")
    if args.json is not None:
        args.json.write_text(json.dumps(result, indent=2))
    loops = result["client_loops"].values()
    failed = sum(c["failed"] for c in loops) + result["haproxy_failed_responses"]
    failed += sum(1 for p in result["perf_analyzer"].values() if p["exit_status"] != 0)
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    from tritium.testing import exit_on_signals

    with exit_on_signals():  # SIGTERM/SIGHUP unwind like Ctrl-C: its servers are stopped
        code = main()
    sys.exit(code)
