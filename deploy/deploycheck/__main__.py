"""`python -m deploycheck [--quick]`: run every deployment check, print what ran, what was
skipped and why, and exit 1 if any check failed. --quick leaves out the live checks (a real
Prometheus scraping tritium under load; podman kube play)."""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable

from deploycheck import chart, crds, kserve, podman, prometheus
from deploycheck.outcome import Outcome, Skip


def run(name: str, check: Callable[[], tuple[list[str], str]]) -> Outcome:
    start = time.monotonic()
    print(f"--- {name}", flush=True)
    try:
        problems, summary = check()
    except Skip as skip:
        return Outcome(name, "skipped", str(skip))
    took = f" ({time.monotonic() - start:.1f} s)"
    if problems:
        for problem in problems:
            print(f"  {problem}")
        return Outcome(name, "failed", f"{len(problems)} problem(s): {problems[0]}")
    return Outcome(name, "ok", summary + took)


def render_and_validate() -> tuple[list[str], str]:
    oldest, newest = chart.kubernetes_versions()
    problems, objects, custom = [], 0, set()
    for set_name, values in chart.value_sets().items():
        for doc in chart.render(values):
            objects += 1
            if not chart.is_builtin(doc):
                custom.add(doc["kind"])
                problems += [f"[{set_name}] {p}" for p in crds.check(doc)]
                continue
            for version in (oldest, newest):
                problem = chart.validate(doc, version)
                if problem:
                    problems.append(f"[{set_name}, Kubernetes {version}] {problem}")
    sets = len(chart.value_sets())
    return problems, (
        f"{sets} value sets, {objects} objects; built-in kinds valid for Kubernetes "
        f"{oldest} and {newest} (strict); custom kinds against their projects' APIs "
        f"(deploycheck/schema/crds.schema.json): {', '.join(sorted(custom))}"
    )


def lint() -> tuple[list[str], str]:
    problems = []
    for set_name, values in chart.value_sets().items():
        problems += [f"[{set_name}] {p}" for p in chart.lint(values)]
    return problems, "helm lint --strict clean for every value set"


def kserve_objects() -> tuple[list[str], str]:
    oldest, newest = chart.kubernetes_versions()
    docs = kserve.objects()
    problems = []
    for doc in docs:
        problems += kserve.check_api(doc)
        problems += kserve.runtime_promises(doc)
        for pod in kserve.embedded_pods(doc):
            for version in (oldest, newest):
                problem = chart.validate(pod, version)
                if problem:
                    problems.append(f"[{doc['kind']} {doc['metadata']['name']}] {problem}")
    kinds = sorted({d["kind"] for d in docs})
    return (
        problems,
        f"{len(docs)} objects ({', '.join(kinds)}) match KServe's API and Kubernetes' core/v1",
    )


def rules() -> tuple[list[str], str]:
    problems = []
    verdict = prometheus.check_rules()
    if verdict:
        problems.append(verdict)
    rendered = chart.render(chart.value_sets().get("hpa-monitoring", {}))
    problems += prometheus.check_prometheus_rule_objects(rendered)
    return problems, "promtool check rules: the rule file and the rendered PrometheusRule"


def live_queries() -> tuple[list[str], str]:
    rendered = chart.render(chart.value_sets()["keda-url"])
    scaled = next(d for d in rendered if d["kind"] == "ScaledObject")
    keda_query = scaled["spec"]["triggers"][0]["metadata"]["query"]
    problems = prometheus.live_autoscaling_signals(keda_query)
    return problems, "adapter and KEDA queries rise under load and fall back (real Prometheus)"


def kube_play() -> tuple[list[str], str]:
    return (
        podman.kube_play(),
        "podman kube play of the rendered Deployment: ready, UID 1000, read-only root",
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="deploycheck", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="leave out the live checks")
    args = parser.parse_args(argv)
    checks: list[tuple[str, Callable[[], tuple[list[str], str]]]] = [
        ("chart: render + Kubernetes schemas", render_and_validate),
        ("chart: helm lint", lint),
        ("kserve: objects", kserve_objects),
        ("prometheus: recording rules", rules),
    ]
    if not args.quick:
        checks += [
            ("prometheus: autoscaling queries on a live server", live_queries),
            ("podman: kube play", kube_play),
        ]
    outcomes = [run(name, check) for name, check in checks]
    print("\ndeploy-check summary")
    for outcome in outcomes:
        print("  " + outcome.line())
    if args.quick:
        print("  (--quick: live Prometheus and podman kube play left out)")
    return 1 if any(o.status == "failed" for o in outcomes) else 0


if __name__ == "__main__":
    sys.exit(main())
