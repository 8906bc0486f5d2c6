"""Per-model inference statistics with the fields of Triton's statistics extension.

Counters only: plain integer additions on the event loop, read as a JSON snapshot by
``GET /v2/models/{m}/stats`` and by the Prometheus page (``frontends/metrics``), so the
two can never disagree. Request-level numbers are recorded by the service;
execution-level numbers by the instance that ran the batch.
"""

from __future__ import annotations

import time
from typing import Any


class Duration:
    __slots__ = ("count", "ns")

    def __init__(self) -> None:
        self.count = 0
        self.ns = 0

    def add(self, ns: int, count: int = 1) -> None:
        self.count += count
        self.ns += ns

    def as_json(self) -> dict[str, int]:
        return {"count": self.count, "ns": self.ns}


class _BatchStats:
    __slots__ = ("compute_input", "compute_infer", "compute_output")

    def __init__(self) -> None:
        self.compute_input = Duration()
        self.compute_infer = Duration()
        self.compute_output = Duration()


# Why a request failed, as Triton's ``nv_inference_request_failure{reason=...}`` says it.
REJECTED, CANCELED, BACKEND, OTHER = range(4)
FAILURE_REASONS = ("REJECTED", "CANCELED", "BACKEND", "OTHER")


class ModelStatistics:
    """Counters for one model version."""

    def __init__(self) -> None:
        self.success = Duration()
        self.fail = Duration()
        self.queue = Duration()
        self.compute_input = Duration()
        self.compute_infer = Duration()
        self.compute_output = Duration()
        # Response-cache lookups that answered (hit) or did not (miss: lookup + insertion).
        self.cache_hit = Duration()
        self.cache_miss = Duration()
        self.inference_count = 0
        self.execution_count = 0
        self.last_inference_ms = 0
        self.batches: dict[int, _BatchStats] = {}
        # Failed requests by reason (indexed by REJECTED..OTHER); they add up to fail.count.
        self.failures = [0, 0, 0, 0]

    def record_request(self, ok: bool, total_ns: int, queue_ns: int) -> None:
        # Duration.add written out: this runs for every request.
        if ok:
            success = self.success
            success.count += 1
            success.ns += total_ns
            queue = self.queue
            queue.count += 1
            queue.ns += queue_ns
        else:
            self.record_failure(total_ns, OTHER)
            return
        self.last_inference_ms = time.time_ns() // 1_000_000

    def record_failure(self, total_ns: int, reason: int) -> None:
        """One failed request; ``reason`` is one of REJECTED, CANCELED, BACKEND, OTHER."""
        fail = self.fail
        fail.count += 1
        fail.ns += total_ns
        self.failures[reason] += 1
        self.last_inference_ms = time.time_ns() // 1_000_000

    def record_execution(
        self, rows: int, requests: int, input_ns: int, infer_ns: int, output_ns: int
    ) -> None:
        """One batch of ``requests`` requests (``rows`` along the batch dimension)."""
        self.execution_count += 1
        self.inference_count += rows
        # Triton attributes the batch's compute times to every request in it.
        self.compute_input.add(input_ns * requests, requests)
        self.compute_infer.add(infer_ns * requests, requests)
        self.compute_output.add(output_ns * requests, requests)
        batch = self.batches.get(rows)
        if batch is None:
            batch = self.batches[rows] = _BatchStats()
        batch.compute_input.add(input_ns)
        batch.compute_infer.add(infer_ns)
        batch.compute_output.add(output_ns)

    def as_json(self, name: str, version: str) -> dict[str, Any]:
        return {
            "name": name,
            "version": version,
            "last_inference": self.last_inference_ms,
            "inference_count": self.inference_count,
            "execution_count": self.execution_count,
            "inference_stats": {
                "success": self.success.as_json(),
                "fail": self.fail.as_json(),
                "queue": self.queue.as_json(),
                "compute_input": self.compute_input.as_json(),
                "compute_infer": self.compute_infer.as_json(),
                "compute_output": self.compute_output.as_json(),
                "cache_hit": self.cache_hit.as_json(),
                "cache_miss": self.cache_miss.as_json(),
            },
            "response_stats": {},
            "batch_stats": [
                {
                    "batch_size": size,
                    "compute_input": b.compute_input.as_json(),
                    "compute_infer": b.compute_infer.as_json(),
                    "compute_output": b.compute_output.as_json(),
                }
                for size, b in sorted(self.batches.items())
            ],
            "memory_usage": [],
        }
