from __future__ import annotations

import os
import time

from bench.server_cpu import CpuSample, cpu_us_per_request, group_cpu_seconds


def test_group_cpu_grows_while_the_group_computes() -> None:
    pgid = os.getpgid(0)
    before = group_cpu_seconds(pgid)
    end = time.process_time() + 0.2
    while time.process_time() < end:
        pass
    assert group_cpu_seconds(pgid) - before >= 0.15


def test_cpu_per_request_divides_by_requests_served() -> None:
    assert cpu_us_per_request(CpuSample(1.0, 100), CpuSample(1.5, 1100)) == 500.0
    assert cpu_us_per_request(CpuSample(1.0, 100), CpuSample(1.5, 100)) is None
    assert cpu_us_per_request(CpuSample(1.0, None), CpuSample(1.5, 100)) is None
    assert cpu_us_per_request(None, CpuSample(1.5, 100)) is None
