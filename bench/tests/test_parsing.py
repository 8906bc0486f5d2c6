"""perf_analyzer CSV and wrk summary parsing, and error extraction from tool output."""

from __future__ import annotations

from pathlib import Path

import pytest
from bench.measurement import failure_text, problem_lines
from bench.perf import parse_csv, perf_command
from bench.scenarios import DEFAULT_SETTINGS, SCENARIOS, select_scenarios
from bench.wrk import check_response, parse_summary, summary_measurement, wrk_command

# A real perf_analyzer 2.40 `-f` report (against Triton, add_sub, concurrency 1).
PA_CSV = (
    "Concurrency,Inferences/Second,Client Send,Network+Server Send/Recv,Server Queue,"
    "Server Compute Input,Server Compute Infer,Server Compute Output,Client Recv,"
    "p50 latency,p90 latency,p95 latency,p99 latency\n"
    "1,4107.74,30,80,12,14,81,22,0,218,298,348,618\n"
)


def test_parse_csv_reads_throughput_p50_p99() -> None:
    assert parse_csv(PA_CSV) == (4107.74, 218.0, 618.0)


def test_parse_csv_without_rows_or_columns_fails() -> None:
    with pytest.raises(ValueError, match="no data row"):
        parse_csv(PA_CSV.splitlines()[0] + "\n")
    with pytest.raises(ValueError, match="p99 latency"):
        parse_csv("Concurrency,Inferences/Second,p50 latency\n1,10,5\n")


def test_perf_command_pins_the_measurement_setup(tmp_path: Path) -> None:
    scenario = select_scenarios(["identity_http_binary_c64"])[0]
    cmd = perf_command(Path("/pa"), scenario, "127.0.0.1:1", DEFAULT_SETTINGS, tmp_path / "x.csv")
    assert cmd[:7] == ["/pa", "-m", "identity", "-u", "127.0.0.1:1", "-i", "http"]
    assert "--concurrency-range=64:64" in cmd
    assert f"--measurement-interval={DEFAULT_SETTINGS.measurement_interval_ms}" in cmd
    assert cmd[cmd.index("-f") + 1] == str(tmp_path / "x.csv")
    assert cmd[-2:] == ["--shape", "INPUT0:16"]


def test_scenario_names_are_stable_and_selectable() -> None:
    assert [s.name for s in SCENARIOS] == [
        "add_sub_http_binary_c1",
        "add_sub_http_binary_c8",
        "identity_http_binary_c64",
        "identity_http_json_c64",
        "identity_inst2_http_binary_c64",
        "image_sum_http_binary_c8",
        "string_upper_http_c8",
        "add_sub_grpc_c1",
        "add_sub_grpc_stream_c1",
        "identity_grpc_c64",
        "identity_grpc_stream_c64",
        "identity_http_shm_c64",
        "identity_grpc_shm_c64",
        "repeat4_grpc_stream_c8",
        "identity_async_http_binary_c64",
        "repeat4_grpc_stream_c1",
        "add_sub_twice_http_binary_c1",
        "identity_chain_http_binary_c64",
        "bls_add_sub_grpc_c1",
        "seq_sum_grpc_stream_c16",
        "identity_cached_http_c1",
        "identity_cached_http_c64",
        "identity_cached_grpc_c64",
    ]
    assert [s.name for s in SCENARIOS if s.acceptance] == SCENARIO_ACCEPTANCE
    picked = select_scenarios(["string_upper_http_c8", "add_sub_http_binary_c1"])
    assert [s.name for s in picked] == ["add_sub_http_binary_c1", "string_upper_http_c8"]
    with pytest.raises(ValueError, match="unknown scenario"):
        select_scenarios(["nope"])


SCENARIO_ACCEPTANCE = ["add_sub_http_binary_c1", "add_sub_http_binary_c8"]


def test_wrk_summary_gives_throughput_and_percentiles() -> None:
    out = (
        "Running 10s test @ http://127.0.0.1:1/v2/models/identity/infer\n"
        'BENCH_JSON {"requests": 50000, "duration_us": 10000000, "p50_us": 7000, '
        '"p99_us": 12000, "errors": {"connect": 0, "read": 0, "write": 0, "status": 0, '
        '"timeout": 0}}\n'
    )
    m = summary_measurement(parse_summary(out), ("wrk",))
    assert m.ok and (m.throughput, m.p50_us, m.p99_us) == (5000.0, 7000.0, 12000.0)


def test_wrk_errors_fail_the_measurement() -> None:
    summary = {
        "requests": 10,
        "duration_us": 1e6,
        "p50_us": 1,
        "p99_us": 1,
        "errors": {"connect": 0, "read": 0, "write": 0, "status": 3, "timeout": 1},
    }
    m = summary_measurement(summary, ())
    assert not m.ok and m.throughput is None
    assert m.error == "wrk saw errors in 10 requests: status=3, timeout=1"
    with pytest.raises(ValueError):
        parse_summary("no summary here\n")


def test_wrk_command_uses_the_lua_script(tmp_path: Path) -> None:
    scenario = select_scenarios(["identity_http_json_c64"])[0]
    cmd = wrk_command(Path("/wrk"), scenario, "127.0.0.1:1", 10, 2, tmp_path / "b.json")
    assert cmd[1:4] == ["-t2", "-c64", "-d10s"]
    assert cmd[-3:] == [
        "http://127.0.0.1:1/v2/models/identity/infer",
        "--",
        str(tmp_path / "b.json"),
    ]
    assert Path(cmd[cmd.index("-s") + 1]).is_file()


def test_check_response_quotes_the_server() -> None:
    assert check_response(200, b'{"outputs": [{"name": "OUTPUT0"}]}') is None
    assert check_response(400, b'{"error": "bad shape"}') == 'HTTP 400: {"error": "bad shape"}'
    assert check_response(200, b"{}") is not None
    assert check_response(200, b"nope") is not None


def test_problem_lines_and_failure_text() -> None:
    out = "Request concurrency: 8\nThread [0] had error: boom\nThread [1] had error: boom\nok\n"
    assert problem_lines(out) == ("Thread [0] had error: boom", "Thread [1] had error: boom")
    assert failure_text(out, 1) == (
        "exit code 1: Thread [0] had error: boom | Thread [1] had error: boom"
    )
    assert failure_text("first\nlast\n", 99) == "exit code 99: first | last"
    assert failure_text("", 3) == "exit code 3: no output"
