"""The chart's custom resources (KEDA ScaledObject, ServiceMonitor, PodMonitor,
PrometheusRule, Istio DestinationRule) against their projects' documented APIs
(deploy/deploycheck/schema/crds.schema.json), and the chart's CI value sets against its
values.schema.json. The rendered objects need Helm (the deploy extra); the schemas
themselves and the value files need only PyYAML and jsonschema, so they run in `make test`."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from typing import Any

import pytest
from deploycheck import chart, crds
from deploycheck.outcome import CHART

META = {"name": "tritium", "labels": {"app.kubernetes.io/name": "tritium"}}
SELECTOR = {"matchLabels": {"app.kubernetes.io/name": "tritium"}}

# What the templates render with the CI value sets, written out for the checks that run
# without Helm (the rendered ones are checked below where Helm is installed).
EXAMPLES: dict[str, dict[str, Any]] = {
    "ScaledObject": {
        "apiVersion": "keda.sh/v1alpha1",
        "kind": "ScaledObject",
        "metadata": META,
        "spec": {
            "scaleTargetRef": {"name": "tritium"},
            "minReplicaCount": 1,
            "maxReplicaCount": 4,
            "pollingInterval": 15,
            "cooldownPeriod": 120,
            "triggers": [
                {
                    "type": "prometheus",
                    "metadata": {
                        "serverAddress": "http://prometheus:9090",
                        "query": "sum(nv_inference_pending_request_count)",
                        "threshold": "8",
                    },
                }
            ],
        },
    },
    "ServiceMonitor": {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "ServiceMonitor",
        "metadata": META,
        "spec": {
            "selector": SELECTOR,
            "endpoints": [{"port": "metrics", "path": "/metrics", "interval": "15s"}],
        },
    },
    "PodMonitor": {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "PodMonitor",
        "metadata": META,
        "spec": {
            "selector": SELECTOR,
            "podMetricsEndpoints": [{"port": "metrics", "path": "/metrics", "interval": "15s"}],
        },
    },
    "PrometheusRule": {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "PrometheusRule",
        "metadata": META,
        "spec": {
            "groups": [
                {
                    "name": "tritium",
                    "rules": [{"record": "tritium:pending:sum", "expr": "sum(x)"}],
                }
            ]
        },
    },
    "DestinationRule": {
        "apiVersion": "networking.istio.io/v1beta1",
        "kind": "DestinationRule",
        "metadata": META,
        "spec": {
            "host": "tritium.default.svc.cluster.local",
            "trafficPolicy": {"loadBalancer": {"consistentHash": {"httpHeaderName": "x-id"}}},
        },
    },
}


def test_the_schema_knows_every_custom_kind_and_is_valid_json_schema() -> None:
    jsonschema = pytest.importorskip("jsonschema")
    assert crds.kinds() == sorted(EXAMPLES)
    for definition in crds.schema()["definitions"].values():
        jsonschema.Draft7Validator.check_schema(definition)


@pytest.mark.parametrize("kind", sorted(EXAMPLES))
def test_objects_as_the_chart_writes_them_are_valid(kind: str, or_skip: Callable[..., Any]):
    assert or_skip(crds.check, EXAMPLES[kind]) == []


@pytest.mark.parametrize(
    ("kind", "path", "value", "words"),
    [
        # A misspelt field (KEDA's is minReplicaCount): a pruning API server drops it silently.
        ("ScaledObject", ("spec", "minReplicas"), 1, "'minReplicas' was unexpected"),
        ("ScaledObject", ("spec", "triggers"), [], "should be non-empty"),
        # KEDA's trigger metadata is a map of strings: an unquoted threshold is refused.
        ("ScaledObject", ("spec", "triggers", 0, "metadata", "threshold"), 8, "not of type"),
        ("ServiceMonitor", ("spec", "endpoints", 0, "interval"), "15 s", "does not match"),
        ("PodMonitor", ("spec", "podMetricsEndpoints", 0, "portName"), "m", "unexpected"),
        ("PrometheusRule", ("spec", "groups", 0, "rules", 0, "alert"), "A", "valid under each"),
        (
            "DestinationRule",
            ("spec", "trafficPolicy", "loadBalancer", "consistentHash", "useSourceIp"),
            True,
            "valid under each",
        ),
    ],
)
def test_the_schema_refuses_what_the_api_refuses(
    kind: str, path: tuple[Any, ...], value: Any, words: str, or_skip: Callable[..., Any]
) -> None:
    doc = copy.deepcopy(EXAMPLES[kind])
    target: Any = doc
    for step in path[:-1]:
        target = target[step]
    target[path[-1]] = value
    problems = or_skip(crds.check, doc)
    assert problems and words in problems[0], problems


def test_ci_value_sets_match_values_schema(or_skip: Callable[..., Any]) -> None:
    jsonschema = pytest.importorskip("jsonschema")
    schema = json.loads((CHART / "values.schema.json").read_text())
    sets = or_skip(chart.value_sets)
    assert sets
    for name, values in sets.items():
        errors = [e.message for e in jsonschema.Draft7Validator(schema).iter_errors(values)]
        assert errors == [], name


def test_every_rendered_custom_resource_matches_its_api(or_skip: Callable[..., Any]) -> None:
    seen = set()
    for name, values in or_skip(chart.value_sets).items():
        for doc in or_skip(chart.render, values):
            if not chart.is_builtin(doc):
                seen.add(doc["kind"])
                assert crds.check(doc) == [], name
    assert seen >= {"ScaledObject", "ServiceMonitor", "PodMonitor", "DestinationRule"}
