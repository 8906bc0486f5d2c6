"""Prometheus: the recording rules pass `promtool`, and the autoscaling queries (the
prometheus-adapter rules the HPA reads, the query KEDA runs) give a value that rises
under load and falls back after it, computed by a real Prometheus scraping a live tritium.
"""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import tempfile
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from deploycheck import chart
from deploycheck.outcome import CHART, EXAMPLES, ROOT, Skip

RULES = CHART / "files" / "recording-rules.yaml"
ADAPTER_RULES = CHART / "files" / "prometheus-adapter-rules.yaml"
# The pod name a Deployment of the chart's release would give (matches its KEDA query).
POD = "tritium-6d5f7b9c8d-x2x7q"
SLEEPER = ROOT / "tests" / "models" / "sleeper"


def promtool(*args: str) -> subprocess.CompletedProcess[str]:
    tool = shutil.which("promtool")
    if tool is None:
        raise Skip("promtool not installed (Debian: apt-get install prometheus)")
    return subprocess.run([tool, *args], capture_output=True, text=True, timeout=60)


def check_rules(rule_file: Path = RULES) -> str:
    """promtool's verdict on a rule file: '' when it passes, else its output."""
    done = promtool("check", "rules", str(rule_file))
    return "" if done.returncode == 0 else (done.stdout + done.stderr).strip()


def check_prometheus_rule_objects(docs: list[dict[str, Any]]) -> list[str]:
    """Every rendered PrometheusRule's spec, written out and checked by promtool."""
    chart.need("yaml")
    import yaml

    problems = []
    for doc in docs:
        if doc.get("kind") != "PrometheusRule":
            continue
        with tempfile.NamedTemporaryFile("w", suffix=".yaml") as handle:
            yaml.safe_dump(doc["spec"], handle)
            handle.flush()
            verdict = check_rules(Path(handle.name))
        if verdict:
            problems.append(f"PrometheusRule {doc['metadata']['name']}: {verdict}")
    return problems


def adapter_queries(namespace: str, pod_pattern: str) -> dict[str, str]:
    """The PromQL prometheus-adapter runs for each custom metric, for one namespace's pods.

    The adapter fills its metricsQuery template: <<.Series>> with the series found by
    seriesQuery, <<.LabelMatchers>> with the namespace and pods asked for, <<.GroupBy>>
    with `pod`.
    """
    chart.need("yaml")
    import yaml

    rules = yaml.safe_load(ADAPTER_RULES.read_text())["rules"]["custom"]
    queries = {}
    for rule in rules:
        series = rule["seriesQuery"].split("{", 1)[0]
        query = (
            rule["metricsQuery"]
            .replace("<<.Series>>", series)
            .replace("<<.LabelMatchers>>", f'namespace="{namespace}",pod=~"{pod_pattern}"')
            .replace("<<.GroupBy>>", "pod")
        )
        queries[rule["name"]["as"]] = query
    return queries


def free_port() -> int:
    # Prometheus needs a fixed port; take one below the ephemeral range that is free now.
    for port in range(23000, 32000, 7):
        with socket.socket() as probe:
            try:
                probe.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError("no free port for Prometheus")


@contextmanager
def running_prometheus(metrics_target: str, work: Path) -> Iterator[str]:
    binary = shutil.which("prometheus")
    if binary is None:
        raise Skip("prometheus not installed (Debian: apt-get install prometheus)")
    port = free_port()
    config = work / "prometheus.yml"
    config.write_text(
        json.dumps(
            {
                "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
                "rule_files": [str(RULES)],
                "scrape_configs": [
                    {
                        "job_name": "tritium",
                        "static_configs": [
                            {
                                "targets": [metrics_target],
                                # What a ServiceMonitor or PodMonitor attaches in a cluster.
                                "labels": {"namespace": chart.NAMESPACE, "pod": POD},
                            }
                        ],
                    }
                ],
            }
        )
    )
    log = open(work / "prometheus.log", "w")  # noqa: SIM115 - closed below
    proc = subprocess.Popen(
        [
            binary,
            f"--config.file={config}",
            f"--storage.tsdb.path={work / 'tsdb'}",
            f"--web.listen-address=127.0.0.1:{port}",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(url + "/-/ready", timeout=2) as reply:
                    if reply.status == 200:
                        break
            except OSError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(
                    "prometheus did not start: " + (work / "prometheus.log").read_text()[-2000:]
                )
            time.sleep(0.5)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


def query(url: str, promql: str) -> float:
    """The value of an instant query (summed over its series; 0 when it has none)."""
    with urllib.request.urlopen(
        f"{url}/api/v1/query?query={urllib.parse.quote(promql)}", timeout=10
    ) as reply:
        body = json.loads(reply.read())
    if body.get("status") != "success":
        raise RuntimeError(f"query failed: {promql}: {body}")
    return sum(float(sample["value"][1]) for sample in body["data"]["result"])


class Load:
    """Closed-loop clients, each sending the sleeper model one 50 ms request after another."""

    def __init__(self, http_url: str, clients: int) -> None:
        self.http_url = http_url
        self.clients = clients
        self.stop = threading.Event()
        self.done = 0
        self.failed = 0
        self.threads = [threading.Thread(target=self.run, daemon=True) for _ in range(clients)]

    def run(self) -> None:
        import numpy as np
        import tritonclient.http as httpclient

        client = httpclient.InferenceServerClient(self.http_url)
        ms = httpclient.InferInput("MS", [1], "INT32")
        ms.set_data_from_numpy(np.array([50], dtype=np.int32))
        while not self.stop.is_set():
            try:
                client.infer("sleeper", [ms])
                self.done += 1
            except Exception:  # counted, not raised: the check reports failures
                self.failed += 1
        client.close()

    def __enter__(self) -> Load:
        for thread in self.threads:
            thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        for thread in self.threads:
            thread.join(timeout=30)


def watch(
    url: str,
    queries: dict[str, str],
    seconds: float,
    until: Callable[[dict[str, float]], bool] | None = None,
) -> dict[str, list[float]]:
    seen: dict[str, list[float]] = {name: [] for name in queries}
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        now = {name: query(url, q) for name, q in queries.items()}
        for name, value in now.items():
            seen[name].append(value)
        if until is not None and until(now):
            break
        time.sleep(1)
    return seen


def live_autoscaling_signals(keda_query: str, log: Callable[[str], None] = print) -> list[str]:
    """Serve the examples and the sleeper model, scrape tritium with a real Prometheus using
    the chart's recording rules, and check every autoscaling query: ~0 idle, well above 0
    under 12 clients on 3 instances, back to 0 after the load stops."""
    chart.need("tritonclient", "numpy", "yaml")
    from tritium.testing import ServerProcess

    queries = {
        **adapter_queries(chart.NAMESPACE, "tritium-.*"),
        "keda (chart)": keda_query,
    }
    # Gauges must rise above these; queue time (µs per request) has its own scale.
    rise = {name: (10_000.0 if "queue_time" in name else 2.0) for name in queries}
    problems = []
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        extra = work / "repo"
        extra.mkdir()
        (extra / "sleeper").symlink_to(SLEEPER)
        server = ServerProcess([EXAMPLES, extra], grpc=False, metrics=True)
        with server, running_prometheus(f"127.0.0.1:{server.metrics_port}", work) as url:
            idle = watch(url, queries, 4)
            log(f"  idle: { {k: round(max(v), 1) for k, v in idle.items()} }")
            with Load(server.http_url, clients=12) as load:
                time.sleep(4)
                busy = watch(url, queries, 12)
            log(
                f"  under load ({load.done} requests, {load.failed} failed): "
                f"{ {k: round(max(v), 1) for k, v in busy.items()} }"
            )
            # rate() over [1m] needs a minute without traffic to reach 0.
            after = watch(url, queries, 90, until=lambda now: all(v < 1 for v in now.values()))
            log(f"  after load: { {k: round(v[-1], 1) for k, v in after.items()} }")
            if load.failed:
                problems.append(f"{load.failed} requests failed under load")
            for name in queries:
                if max(busy[name]) < rise[name]:
                    problems.append(f"{name}: did not rise under load (max {max(busy[name]):.1f})")
                if after[name][-1] >= 1:
                    problems.append(f"{name}: did not fall back after load ({after[name][-1]:.1f})")
    return problems
