"""tritium's onnxruntime backend against real Triton serving the same ONNX model the way a
Triton build without that backend does (a Python-backend model.py running onnxruntime).

The shared tools' bench models: Triton serves ``triton/mlp_py`` (``1/mlp.onnx`` run by
``model.py``, one ORT thread, the batch in one ``session.run``), tritium serves
``tritium/mlp_onnx`` (the same bytes as ``1/model.onnx``, ``platform: "onnxruntime_onnx"``,
one ORT thread). Both: INPUT0/OUTPUT0 FP32 [256], max_batch_size 64, dynamic batching, one
CPU instance. perf_analyzer runs HTTP c1, HTTP c16 and gRPC c16 against each server,
alternating servers within every round (which goes first alternates between rounds); the
report gives medians and tritium/Triton ratios (target ≥ 1.5 each), raw onnxruntime in one
process at the batch sizes the batcher formed, and the memory of tritium's instance worker.

    .venv/bin/python bench/onnx_mlp.py [--rounds 3] [--anchors /tmp/anchors] [--tritium-arg=FLAG]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from bench import run_meta  # noqa: E402
from bench.anchors import add_server_options, locate_anchors  # noqa: E402
from bench.measurement import Measurement, paired_throughputs  # noqa: E402
from bench.perf import run_perf_analyzer  # noqa: E402
from bench.scenarios import DEFAULT_SETTINGS, Scenario  # noqa: E402
from bench.servers import (  # noqa: E402
    Server,
    TritiumServer,
    TritonServer,
    group_pids,
    wait_models_ready,
)

SHAPE = ("--shape", "INPUT0:256")
#: (label, protocol, concurrency)
LOADS = (("http_c1", "http", 1), ("http_c16", "http", 16), ("grpc_c16", "grpc", 16))
MODELS = {"triton": "mlp_py", "tritium": "mlp_onnx"}
TARGET = 1.5


def scenario(label: str, protocol: str, concurrency: int, server: str) -> Scenario:
    return Scenario(
        name=f"mlp_onnx_{label}",
        model=MODELS[server],
        tool="perf_analyzer",
        concurrency=concurrency,
        description=f"the ONNX MLP, {protocol} concurrency {concurrency}",
        perf_args=SHAPE,
        protocol=protocol,  # type: ignore[arg-type]
    )


def raw_ort_rows_per_s(model: Path, batch: int, seconds: float = 1.0) -> float:
    """Rows/s of onnxruntime alone, one thread, ``session.run`` in a loop."""
    import numpy as np
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    session = ort.InferenceSession(str(model), options, providers=["CPUExecutionProvider"])
    x = np.random.default_rng(0).random((batch, 256), dtype=np.float32)
    runs = 0
    start = time.perf_counter()
    while time.perf_counter() - start < seconds:
        session.run(None, {"INPUT0": x})
        runs += 1
    return runs * batch / (time.perf_counter() - start)


def worker_rss_mib(pgid: int) -> list[float]:
    """Resident memory of each process of tritium's group but the server itself."""
    sizes = []
    for pid in group_pids(pgid):
        if pid == pgid:
            continue
        try:
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    sizes.append(int(line.split()[1]) / 1024)
        except OSError:
            continue
    return sizes


def paired(ours: list[Measurement], theirs: list[Measurement]) -> list[tuple[float, float]]:
    """(tritium, Triton) throughput of each round in which both were measured; every round
    measures both servers, so unequal lists are a ValueError."""
    return paired_throughputs(ours, theirs, strict=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    add_server_options(parser)
    args = parser.parse_args()

    anchors = locate_anchors(args.tools_dir, args.anchors)
    models = args.anchors / "bench-models"
    onnx_file = models / "tritium" / "mlp_onnx" / "1" / "model.onnx"
    if not onnx_file.is_file():
        print(f"{onnx_file} is missing: run the shared tools' setup-anchors.sh", file=sys.stderr)
        return 2
    print(f"[bench] {run_meta.machine()}; {run_meta.session_weight()}", flush=True)
    work = Path(tempfile.mkdtemp(prefix="onnx-mlp-bench-"))
    # Triton (--exit-on-error) gets a repository with mlp_py alone.
    triton_repo = work / "triton"
    triton_repo.mkdir()
    (triton_repo / "mlp_py").symlink_to(models / "triton" / "mlp_py")
    ports = tuple(int(p) for p in args.triton_ports.split(","))
    servers: dict[str, Server] = {
        "tritium": TritiumServer(
            models / "tritium", args.tritium_port, work, tuple(args.tritium_arg)
        ),
        "triton": TritonServer(anchors, triton_repo, (ports[0], ports[1], ports[2]), work),
    }
    results: dict[tuple[str, str], list[Measurement]] = {}
    memory: list[float] = []
    try:
        for name, server in servers.items():
            server.start()
            wait_models_ready(server.url, [MODELS[name]])
        pgid = servers["tritium"].pgid
        for round_number in range(1, args.rounds + 1):
            # Each load runs both servers back to back, in turn first (ABBA over rounds),
            # so that whatever a run leaves behind favours neither.
            order = list(servers.items())
            if round_number % 2 == 0:
                order.reverse()
            for label, protocol, concurrency in LOADS:
                for name, server in order:
                    url = server.grpc_url if protocol == "grpc" else server.url
                    ticks = run_meta.cpu_ticks()
                    measured = run_perf_analyzer(
                        anchors.perf_analyzer,
                        scenario(label, protocol, concurrency, name),
                        url,
                        DEFAULT_SETTINGS,
                        work,
                        work / f"{name}-{label}-{round_number}.log",
                    )
                    results.setdefault((label, name), []).append(measured)
                    shown = (
                        f"{measured.throughput:,.0f}/s"
                        if measured.throughput
                        else str(measured.error)
                    )
                    stolen = run_meta.stolen_share(ticks, run_meta.cpu_ticks())
                    if stolen is not None:
                        shown += f"  (stolen {stolen:.1%})"
                    print(f"[round {round_number}] {label:9} {name:8} {shown}", flush=True)
        if pgid is not None:
            memory = worker_rss_mib(pgid)
    finally:
        for server in servers.values():
            server.stop()

    print("\n| load | tritium infer/s | Triton infer/s | ratio (median of rounds) | target |")
    print("|---|---:|---:|---:|---|")
    worst = None
    for label, _, _ in LOADS:
        pairs = paired(results[(label, "tritium")], results[(label, "triton")])
        if not pairs:
            print(f"| {label} | failed | | | |")
            worst = 0.0
            continue
        ours = [a for a, _ in pairs]
        theirs = [b for _, b in pairs]
        ratios = [a / b for a, b in pairs]
        ratio = statistics.median(ratios)
        worst = ratio if worst is None else min(worst, ratio)
        print(
            f"| {label} | {statistics.median(ours):,.0f} | {statistics.median(theirs):,.0f} | "
            f"{ratio:.2f}× ({', '.join(f'{r:.2f}' for r in ratios)}) | ≥ {TARGET}× |"
        )
    print("\nraw onnxruntime, one process, one thread (rows/s):")
    for batch in (1, 4, 8, 16):
        print(f"  batch {batch:2}: {raw_ort_rows_per_s(onnx_file, batch):,.0f}")
    if memory:
        print(f"tritium worker RSS (MiB): {', '.join(f'{m:.0f}' for m in memory)}")
    return 0 if worst is not None and worst >= TARGET else 1


if __name__ == "__main__":
    from tritium.testing import exit_on_signals

    with exit_on_signals():  # SIGTERM/SIGHUP unwind like Ctrl-C: its servers are stopped
        code = main()
    sys.exit(code)
