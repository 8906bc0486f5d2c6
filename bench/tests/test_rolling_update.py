"""The rolling-update bench's pieces that need no server: the HAProxy configuration it
writes (checked by haproxy itself where installed) and the Markdown it reports."""

from __future__ import annotations

import shutil
import subprocess

import pytest
from bench.rolling_update import HaProxy, markdown, perf_summary


def test_haproxy_config_checks_readiness_and_retries_nothing(tmp_path):
    lb = HaProxy(tmp_path, [(24101, 24102), (24103, 24104)], (24105, 24106), 500)
    text = lb.config.read_text()
    assert "option httpchk GET /v2/health/ready" in text
    assert "retries 0" in text
    assert "server s1 127.0.0.1:24104 proto h2 check port 24103 check-proto h1" in text
    assert "bind 127.0.0.1:24106 proto h2" in text
    haproxy = shutil.which("haproxy", path="/usr/sbin:/usr/bin:/sbin:/bin")
    if haproxy is None:
        pytest.skip("haproxy is not installed")
    check = subprocess.run([haproxy, "-c", "-f", str(lb.config)], capture_output=True, text=True)
    assert check.returncode == 0, check.stdout + check.stderr


def test_perf_summary_and_markdown_report_failures():
    aborted = perf_summary(99, "Request concurrency: 2\nThread [0] had error: refused\n")
    done = perf_summary(0, "Concurrency: 2, throughput: 230.5 infer/sec, latency 8000 usec\n")
    assert aborted == {"exit_status": 99, "error_lines": ["Thread [0] had error: refused"],
                       "throughput_infer_per_s": None}  # fmt: skip
    assert done["throughput_infer_per_s"] == 230.5 and done["error_lines"] == []
    counters = {"req_tot": 10, "hrsp_2xx": 9, "hrsp_4xx": 0, "hrsp_5xx": 1, "ereq": 0}
    result = {
        "drain_delay_secs": 0, "replicas": 2, "check_ms": 500, "update_s": 14.1, "load_s": 20.2,
        "steps": [{"replaced_slot": 0, "new_slot": 2, "new_up_s": 7.7, "old_exit_status": 0,
                   "old_stop_s": 0.4}],
        "perf_analyzer": {"http": aborted, "grpc": done},
        "client_loops": {"http": {"ok": 5, "failed": 1, "errors": ["503\nService Unavailable"]},
                         "grpc": {"ok": 6, "failed": 0, "errors": []}},
        "haproxy": {"http_in/FRONTEND": counters, "grpc_in/FRONTEND": dict(counters, hrsp_5xx=0)},
    }  # fmt: skip
    text = markdown(result)
    assert "| http | 99 | aborted | 1 | 5 | 1 | 10 | 1 |" in text
    assert "| grpc | 0 | 230.5 | 0 | 6 | 0 | 10 | 0 |" in text
    assert "- `503 Service Unavailable`" in text  # one line per error
