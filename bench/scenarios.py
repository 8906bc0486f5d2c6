"""The benchmark scenarios (names are stable: results are compared across runs by name)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

Tool = Literal["perf_analyzer", "wrk"]

# seq_sum keeps an INT32 running sum per sequence: perf_analyzer's default random inputs
# overflow it within a few steps, so every step sends 1 (the same data for both servers).
SEQ_SUM_DATA = Path(__file__).resolve().parent / "data" / "seq_sum_ones.json"


@dataclass(frozen=True)
class Scenario:
    """One load pattern applied identically to both servers."""

    name: str
    model: str
    tool: Tool
    concurrency: int
    description: str
    # Extra perf_analyzer flags (input shapes, data) for this scenario.
    perf_args: tuple[str, ...] = ()
    # The v2 JSON infer request body wrk posts (wrk scenarios only).
    json_body: dict[str, Any] | None = None
    # Acceptance scenarios: tritium must reach at least Triton's throughput.
    acceptance: bool = False
    # perf_analyzer's -i: "http" or "grpc".
    protocol: Literal["http", "grpc"] = "http"
    # Another scenario this one is compared with, per server (e.g. two instances against
    # one); the report gives the throughput ratios when both are in the run.
    baseline: str | None = None
    # tritium's throughput must not fall below the baseline's (paired rounds, see report).
    check_baseline: bool = False
    # An answer check (bench/checks.py) run on each server before and after the load; the
    # run fails when either says the answers were wrong.
    answer_check: str | None = None


@dataclass(frozen=True)
class MeasureSettings:
    """The fixed measurement setup, identical for both servers within one run."""

    measurement_interval_ms: int = 2000
    # perf_analyzer's stability criterion on average latency and throughput over its last 3
    # windows; 10 (its default) rarely converges on a shared 2-core machine.
    stability_percentage: int = 20
    max_trials: int = 10
    wrk_duration_s: int = 10
    wrk_warmup_s: int = 2
    wrk_threads: int = 2


DEFAULT_SETTINGS = MeasureSettings()
QUICK_SETTINGS = MeasureSettings(
    measurement_interval_ms=500,
    stability_percentage=50,
    max_trials=6,
    wrk_duration_s=2,
    wrk_warmup_s=1,
)

SCENARIOS: tuple[Scenario, ...] = (
    Scenario(
        name="add_sub_http_binary_c1",
        model="add_sub",
        tool="perf_analyzer",
        concurrency=1,
        description="add_sub FP32[4]+[4], HTTP with binary tensors, 1 request in flight",
        acceptance=True,
    ),
    Scenario(
        name="add_sub_http_binary_c8",
        model="add_sub",
        tool="perf_analyzer",
        concurrency=8,
        description="add_sub FP32[4]+[4], HTTP with binary tensors, 8 requests in flight",
        acceptance=True,
    ),
    Scenario(
        name="identity_http_binary_c64",
        model="identity",
        tool="perf_analyzer",
        concurrency=64,
        description="identity FP32[16] (dynamic batching, 500 µs delay), HTTP binary, 64 in flight",
        perf_args=("--shape", "INPUT0:16"),
    ),
    Scenario(
        name="identity_http_json_c64",
        model="identity",
        tool="wrk",
        concurrency=64,
        description="identity FP32[1,16], HTTP JSON body posted by wrk on 64 connections",
        json_body={
            "inputs": [
                {
                    "name": "INPUT0",
                    "datatype": "FP32",
                    "shape": [1, 16],
                    "data": [float(i) for i in range(16)],
                }
            ]
        },
    ),
    Scenario(
        name="identity_inst2_http_binary_c64",
        model="identity_inst2",
        tool="perf_analyzer",
        concurrency=64,
        description="identity FP32[16] with two instances, HTTP binary, 64 in flight",
        perf_args=("--shape", "INPUT0:16"),
        baseline="identity_http_binary_c64",
        check_baseline=True,
    ),
    Scenario(
        name="image_sum_http_binary_c8",
        model="image_sum",
        tool="perf_analyzer",
        concurrency=8,
        description="image_sum UINT8[224,224,3] (150 KB per request, batched), HTTP binary, 8 in flight",
    ),
    Scenario(
        name="string_upper_http_c8",
        model="string_upper",
        tool="perf_analyzer",
        concurrency=8,
        description="string_upper BYTES[8] (8 strings of 16 chars), HTTP binary, 8 in flight",
        perf_args=("--shape", "TEXT:8", "--string-data", "hello-tritium-16"),
    ),
)

SCENARIOS = SCENARIOS + (
    Scenario(
        name="add_sub_grpc_c1",
        model="add_sub",
        tool="perf_analyzer",
        concurrency=1,
        description="add_sub FP32[4]+[4], gRPC unary, 1 request in flight",
        protocol="grpc",
    ),
    Scenario(
        name="add_sub_grpc_stream_c1",
        model="add_sub",
        tool="perf_analyzer",
        concurrency=1,
        description="add_sub FP32[4]+[4], gRPC bidirectional stream, 1 request in flight",
        perf_args=("--streaming",),
        protocol="grpc",
    ),
    Scenario(
        name="identity_grpc_c64",
        model="identity",
        tool="perf_analyzer",
        concurrency=64,
        description="identity FP32[16] (dynamic batching), gRPC unary, 64 in flight",
        perf_args=("--shape", "INPUT0:16"),
        protocol="grpc",
    ),
    Scenario(
        name="identity_grpc_stream_c64",
        model="identity",
        tool="perf_analyzer",
        concurrency=64,
        description="identity FP32[16] (dynamic batching), gRPC bidirectional stream, 64 in flight",
        perf_args=("--shape", "INPUT0:16", "--streaming"),
        protocol="grpc",
    ),
)

SCENARIOS = SCENARIOS + (
    Scenario(
        name="identity_http_shm_c64",
        model="identity",
        tool="perf_analyzer",
        concurrency=64,
        description="identity FP32[16], HTTP, inputs and outputs in system shared memory, 64 in flight",
        perf_args=("--shape", "INPUT0:16", "--shared-memory=system"),
    ),
    Scenario(
        name="identity_grpc_shm_c64",
        model="identity",
        tool="perf_analyzer",
        concurrency=64,
        description="identity FP32[16], gRPC, inputs and outputs in system shared memory, 64 in flight",
        perf_args=("--shape", "INPUT0:16", "--shared-memory=system"),
        protocol="grpc",
    ),
)

SCENARIOS = SCENARIOS + (
    Scenario(
        name="repeat4_grpc_stream_c8",
        model="repeat4",
        tool="perf_analyzer",
        concurrency=8,
        description="repeat4 (decoupled: 4 responses per request), gRPC stream, 8 in flight",
        perf_args=("--streaming",),
        protocol="grpc",
    ),
    Scenario(
        name="identity_async_http_binary_c64",
        model="identity_async",
        tool="perf_analyzer",
        concurrency=64,
        description="identity with async def execute, HTTP binary, 64 in flight",
        perf_args=("--shape", "INPUT0:16"),
        baseline="identity_http_binary_c64",
        check_baseline=True,
    ),
    Scenario(
        name="repeat4_grpc_stream_c1",
        model="repeat4",
        tool="perf_analyzer",
        concurrency=1,
        description="repeat4 (decoupled), gRPC stream, 1 in flight (time to first response)",
        perf_args=("--streaming",),
        protocol="grpc",
    ),
    Scenario(
        name="add_sub_twice_http_binary_c1",
        model="add_sub_twice",
        tool="perf_analyzer",
        concurrency=1,
        description="ensemble of add_sub twice (two steps, FP32[4]+[4]), HTTP binary, 1 in flight",
    ),
    Scenario(
        name="identity_chain_http_binary_c64",
        model="identity_chain",
        tool="perf_analyzer",
        concurrency=64,
        description="ensemble identity -> identity (each step batched), FP32[16], HTTP binary, "
        "64 in flight",
        perf_args=("--shape", "INPUT0:16"),
    ),
    Scenario(
        name="bls_add_sub_grpc_c1",
        model="bls_add_sub",
        tool="perf_analyzer",
        concurrency=1,
        description="Python model calling add_sub with BLS (exec), FP32[4]+[4], gRPC, 1 in flight",
        protocol="grpc",
    ),
    Scenario(
        name="seq_sum_grpc_stream_c16",
        model="seq_sum",
        tool="perf_analyzer",
        concurrency=16,
        description="seq_sum (sequence batching, oldest strategy), gRPC stream, 16 sequences "
        "in flight",
        perf_args=("--streaming", "--input-data", str(SEQ_SUM_DATA)),
        protocol="grpc",
        answer_check="seq_sum_sequence",
    ),
)

# identity_cached with the same input every time: after the first request every one is a
# response-cache hit. --async: sync perf_analyzer's threads starve its own main thread at
# these rates (see the shared tools' README).
_CACHED_ARGS = ("--input-data", "zero", "--async")
SCENARIOS += (
    Scenario(
        name="identity_cached_http_c1",
        model="identity_cached",
        tool="perf_analyzer",
        concurrency=1,
        description="identity_cached FP32[16], response-cache hits, HTTP binary, 1 in flight",
        perf_args=_CACHED_ARGS,
    ),
    Scenario(
        name="identity_cached_http_c64",
        model="identity_cached",
        tool="perf_analyzer",
        concurrency=64,
        description="identity_cached FP32[16], response-cache hits, HTTP binary, 64 in flight",
        perf_args=_CACHED_ARGS,
    ),
    Scenario(
        name="identity_cached_grpc_c64",
        model="identity_cached",
        tool="perf_analyzer",
        concurrency=64,
        description="identity_cached FP32[16], response-cache hits, gRPC, 64 in flight",
        perf_args=_CACHED_ARGS,
        protocol="grpc",
    ),
)

SCENARIO_NAMES: tuple[str, ...] = tuple(s.name for s in SCENARIOS)


def select_scenarios(names: list[str] | None) -> list[Scenario]:
    """The scenarios named (in the canonical order), all of them when `names` is empty."""
    if not names:
        return list(SCENARIOS)
    unknown = sorted(set(names) - set(SCENARIO_NAMES))
    if unknown:
        raise ValueError(
            f"unknown scenario(s) {', '.join(unknown)}; known: {', '.join(SCENARIO_NAMES)}"
        )
    return [s for s in SCENARIOS if s.name in names]
