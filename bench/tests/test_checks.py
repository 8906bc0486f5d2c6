"""The seq_sum answer check against a real tritium server serving the bench's seq_sum."""

from __future__ import annotations

import shutil
from pathlib import Path

from bench.checks import seq_sum_sequence

from tritium.testing import ServerProcess

BENCH_MODELS = Path(__file__).resolve().parents[1] / "model_repository"


def test_seq_sum_check_passes_on_correct_sums_and_names_wrong_ones(tmp_path):
    shutil.copytree(BENCH_MODELS / "seq_sum", tmp_path / "seq_sum")
    with ServerProcess([tmp_path], ["--allow-metrics=false"], grpc=True) as server:
        assert seq_sum_sequence(server.grpc_url) is None
        assert seq_sum_sequence(server.grpc_url) is None  # a second sequence starts at 0
    # A model that answers wrong sums is caught.
    model = tmp_path / "seq_sum" / "1" / "model.py"
    model.write_text(model.read_text().replace("+ int(value.flat[0])", "+ 2 * int(value.flat[0])"))
    with ServerProcess([tmp_path], ["--allow-metrics=false"], grpc=True) as server:
        wrong = seq_sum_sequence(server.grpc_url)
    assert wrong is not None and "expected [5, 12, 23, 36]" in wrong, wrong
