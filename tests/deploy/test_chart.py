"""The Helm chart renders for every value set, lints clean, and every object it renders is
valid Kubernetes for the oldest and newest versions kubernetes-validate knows."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from deploycheck import chart


def by_kind(docs: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    return next(d for d in docs if d["kind"] == kind)


def test_every_value_set_renders_valid_kubernetes_objects(or_skip: Callable[..., Any]) -> None:
    oldest, newest = or_skip(chart.kubernetes_versions)
    sets = or_skip(chart.value_sets)
    assert len(sets) >= 5
    for name, values in sets.items():
        for doc in or_skip(chart.render, values):
            if chart.is_builtin(doc):
                for version in (oldest, newest):
                    assert chart.validate(doc, version) == "", (name, version)


def test_lint_is_clean_for_every_value_set(or_skip: Callable[..., Any]) -> None:
    for name, values in or_skip(chart.value_sets).items():
        assert or_skip(chart.lint, values) == [], name


def test_deployment_probes_drain_and_security(or_skip: Callable[..., Any]) -> None:
    deployment = by_kind(or_skip(chart.render, {}), "Deployment")
    pod = deployment["spec"]["template"]["spec"]
    container = pod["containers"][0]
    assert container["args"][0] == "tritonserver"
    assert container["startupProbe"]["httpGet"]["path"] == "/v2/health/ready"
    assert container["readinessProbe"]["httpGet"]["path"] == "/v2/health/ready"
    assert container["livenessProbe"]["httpGet"]["path"] == "/v2/health/live"
    assert container["lifecycle"]["preStop"]["exec"]["command"] == ["sleep", "5"]
    # preStop 5 + exit timeout 30 + margin 10; no drain delay unless it is set.
    assert pod["terminationGracePeriodSeconds"] == 45
    assert not any(a.startswith("--drain-delay-secs") for a in container["args"])
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert pod["securityContext"]["runAsUser"] == 1000
    mounts = {m["mountPath"] for m in container["volumeMounts"]}
    assert {"/models", "/dev/shm", "/tmp"} <= mounts
    assert deployment["spec"]["strategy"]["rollingUpdate"]["maxUnavailable"] == 0


def test_drain_delay_is_passed_only_when_set_and_counted_in_the_grace_period(
    or_skip: Callable[..., Any],
) -> None:
    deployment = by_kind(or_skip(chart.render, {"server": {"drainDelaySeconds": 15}}), "Deployment")
    pod = deployment["spec"]["template"]["spec"]
    assert "--drain-delay-secs=15" in pod["containers"][0]["args"]
    assert pod["terminationGracePeriodSeconds"] == 5 + 15 + 30 + 10


def test_a_grace_period_shorter_than_the_drain_is_refused(or_skip: Callable[..., Any]) -> None:
    error = or_skip(chart.render_error, {"terminationGracePeriodSeconds": 20})
    assert "below preStop sleep + drain delay + exit timeout + margin (45)" in error
    assert or_skip(chart.render_error, {"terminationGracePeriodSeconds": 60}) == ""


def test_values_schema_refuses_unknown_and_bad_values(or_skip: Callable[..., Any]) -> None:
    assert "modelControlMode" in or_skip(
        chart.render_error, {"server": {"modelControlMode": "sometimes"}}
    )
    assert or_skip(chart.render_error, {"replicas": 3}) != ""  # a typo of replicaCount


def test_service_marks_grpc_as_h2c(or_skip: Callable[..., Any]) -> None:
    service = by_kind(or_skip(chart.render, {}), "Service")
    ports = {p["name"]: p for p in service["spec"]["ports"]}
    assert ports["grpc"]["appProtocol"] == "kubernetes.io/h2c"
    assert {p["port"] for p in ports.values()} == {8000, 8001, 8002}


@pytest.mark.parametrize(
    ("metric", "name"),
    [
        ("pendingRequests", "tritium_pending_requests"),
        ("queueTimePerRequest", "tritium_queue_time_per_request_us"),
    ],
)
def test_hpa_scales_on_an_adapter_metric_per_pod(
    metric: str, name: str, or_skip: Callable[..., Any]
) -> None:
    hpa = by_kind(
        or_skip(chart.render, {"autoscaling": {"enabled": True, "metric": metric}}),
        "HorizontalPodAutoscaler",
    )
    assert hpa["apiVersion"] == "autoscaling/v2"
    (spec,) = hpa["spec"]["metrics"]
    assert spec["type"] == "Pods"
    assert spec["pods"]["metric"]["name"] == name
    assert spec["pods"]["target"]["type"] == "AverageValue"


def test_hpa_and_keda_together_are_refused(or_skip: Callable[..., Any]) -> None:
    error = or_skip(
        chart.render_error, {"autoscaling": {"enabled": True}, "keda": {"enabled": True}}
    )
    assert "enable one" in error


def test_model_repository_sources(or_skip: Callable[..., Any]) -> None:
    url = or_skip(
        chart.render, {"modelRepository": {"source": "url", "url": {"uri": "s3://b/repo"}}}
    )
    init = by_kind(url, "Deployment")["spec"]["template"]["spec"]["initContainers"][0]
    assert init["args"] == ["s3://b/repo", "/models"]
    image = or_skip(
        chart.render,
        {"modelRepository": {"source": "image", "image": {"image": "models:1", "path": "/m/"}}},
    )
    init = by_kind(image, "Deployment")["spec"]["template"]["spec"]["initContainers"][0]
    assert init["image"] == "models:1"
    assert init["command"] == ["cp", "-R", "/m/.", "/models/"]
    assert "modelRepository.url.uri is required" in or_skip(
        chart.render_error, {"modelRepository": {"source": "url"}}
    )
