"""The real perf_analyzer over gRPC (unary and ``--streaming``) against tritium.

Needs the perf_analyzer installed by ../shared/tools/setup-anchors.sh; skipped without
it. Measurement windows are short: this checks that the tool works end to end (model
metadata, config, inference, server-side statistics), not how fast the server is.
"""

from __future__ import annotations

import csv
import os
import subprocess
from pathlib import Path

import pytest

PERF_ANALYZER = Path(os.environ.get("ANCHORS", "/tmp/anchors")) / "bin" / "perf_analyzer"

pytestmark = [
    pytest.mark.anchors,
    pytest.mark.skipif(not PERF_ANALYZER.exists(), reason=f"perf_analyzer is not installed at {PERF_ANALYZER} (../shared/tools/setup-anchors.sh installs it)"),
]

CASES = {
    "add_sub-unary": ("add_sub", []),
    "identity-unary": ("identity", ["--shape", "INPUT0:16"]),
    "identity-streaming": ("identity", ["--shape", "INPUT0:16", "--streaming"]),
    "string_upper-streaming": ("string_upper", ["--shape", "TEXT:4", "--streaming"]),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_perf_analyzer_over_grpc(grpc_server, tmp_path, case):
    model, extra = CASES[case]
    report = tmp_path / "report.csv"
    cmd = [
        str(PERF_ANALYZER), "-m", model, "-u", grpc_server.grpc_url, "-i", "grpc",
        "--concurrency-range=2:2", "--measurement-interval=300", "--stability-percentage=999",
        "--max-trials=10", "-f", str(report), *extra,
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=90, stdin=subprocess.DEVNULL)
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, output[-3000:]
    rows = list(csv.DictReader(report.read_text().splitlines()))
    assert rows and float(rows[0]["Inferences/Second"]) > 0, output[-3000:]
