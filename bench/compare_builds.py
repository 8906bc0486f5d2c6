"""Paired before/after runs of two tritium checkouts on the same scenarios.

A change that must not slow the request path (a refactoring, a new feature off by
default) is measured against the commit before it: each round runs every scenario with
``bench/run.py --servers tritium`` twice, back to back, once with the base checkout's
sources and once with the head's (which goes first alternates), so a drift of the machine
hits both builds of a pair alike. Every run can
include real Triton too (``--with-triton``), which makes each round's tritium/Triton
ratio a second, drift-free view.

    .venv/bin/python bench/compare_builds.py --base /tmp/base --head . \\
        --scenarios add_sub_http_binary_c1 identity_http_json_c64 --rounds 3

``--base`` and ``--head`` are checkouts (their ``src/`` is put first on ``PYTHONPATH``
and their own ``bench/run.py`` drives the run). Prints a Markdown table: median
infer/s of each build, head/base, and the per-round head/base ratios.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

MAIN_SCENARIOS = (
    "add_sub_http_binary_c1",
    "identity_http_json_c64",
    "identity_http_binary_c64",
    "add_sub_grpc_c1",
    "identity_grpc_c64",
    "identity_chain_http_binary_c64",
    "repeat4_grpc_stream_c8",
    "seq_sum_grpc_stream_c16",
)


def run_once(checkout: Path, scenarios: list[str], results: Path, with_triton: bool) -> dict:
    """One round of ``scenarios`` on ``checkout``'s tritium; the report's JSON."""
    results.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, PYTHONPATH=str(checkout / "src"))
    servers = ["tritium", "triton"] if with_triton else ["tritium"]
    cmd = [
        sys.executable,
        str(checkout / "bench" / "run.py"),
        "--rounds", "1",
        "--servers", *servers,
        "--results-dir", str(results),
        "--scenarios", *scenarios,
    ]  # fmt: skip
    subprocess.run(cmd, env=env, check=False)
    reports = sorted(results.glob("*.json"))
    if not reports:
        raise SystemExit(f"no report written under {results}")
    return json.loads(reports[-1].read_text())


def throughputs(report: dict) -> dict[str, float | None]:
    return {s["scenario"]: s["median"]["tritium"]["throughput"] for s in report["scenarios"]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base", type=Path, required=True, help="checkout measured as before")
    parser.add_argument("--head", type=Path, required=True, help="checkout measured as after")
    parser.add_argument("--scenarios", nargs="+", default=list(MAIN_SCENARIOS))
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--with-triton", action="store_true", help="measure Triton in each run")
    parser.add_argument("--results-dir", type=Path, default=Path("bench/results/compare"))
    args = parser.parse_args(argv)

    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    out = args.results_dir.resolve() / stamp
    builds = {"base": args.base.resolve(), "head": args.head.resolve()}
    runs: dict[str, list[dict[str, float | None]]] = {"base": [], "head": []}
    for round_no in range(args.rounds):
        measured: dict[str, dict[str, float | None]] = {"base": {}, "head": {}}
        # Scenario by scenario, the two builds back to back (the first of them alternating),
        # so a drift of the machine over a round falls on both builds of a pair alike.
        for index, scenario in enumerate(args.scenarios):
            order = ["base", "head"] if (round_no + index) % 2 == 0 else ["head", "base"]
            for name in order:
                folder = out / f"{name}-{round_no + 1}-{scenario}"
                report = run_once(builds[name], [scenario], folder, args.with_triton)
                measured[name].update(throughputs(report))
        for name in runs:
            runs[name].append(measured[name])

    lines = [
        f"base `{builds['base']}`, head `{builds['head']}`, {args.rounds} rounds, {stamp}",
        "",
        "| scenario | base infer/s | head infer/s | head/base | per round |",
        "|---|---:|---:|---:|---|",
    ]
    for scenario in args.scenarios:
        base = [r.get(scenario) for r in runs["base"]]
        head = [r.get(scenario) for r in runs["head"]]
        per_round = [h / b if h and b else None for h, b in zip(head, base)]
        base_m = _median(base)
        head_m = _median(head)
        ratio = head_m / base_m if head_m and base_m else None
        rounds = " / ".join(f"{r:.2f}" if r else "—" for r in per_round)
        lines.append(
            f"| `{scenario}` | {_num(base_m)} | {_num(head_m)} | "
            f"{f'{ratio:.2f}' if ratio else '—'} | {rounds} |"
        )
    table = "\n".join(lines) + "\n"
    out.mkdir(parents=True, exist_ok=True)
    (out / "compare.md").write_text(table)
    print(table)
    return 0


def _median(values: list[float | None]) -> float | None:
    present = [v for v in values if v]
    return statistics.median(present) if present else None


def _num(value: float | None) -> str:
    return f"{value:,.0f}" if value else "—"


if __name__ == "__main__":
    sys.exit(main())
