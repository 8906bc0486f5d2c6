"""The KServe runtimes and InferenceServices: KServe's documented API, Kubernetes' core/v1
inside them, and what the runtimes promise (issue #30)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from deploycheck import chart, kserve


def test_kserve_objects_match_kserves_api(or_skip: Callable[..., Any]) -> None:
    # PyYAML and jsonschema only (the test extra): runs in `make test`.
    docs = or_skip(kserve.objects)
    kinds = {d["kind"] for d in docs}
    assert {"ClusterServingRuntime", "ServingRuntime", "InferenceService", "TrainedModel"} <= kinds
    for doc in docs:
        assert or_skip(kserve.check_api, doc) == []
        assert kserve.runtime_promises(doc) == []


def test_kserve_objects_embed_valid_kubernetes(or_skip: Callable[..., Any]) -> None:
    oldest, newest = or_skip(chart.kubernetes_versions)
    for doc in or_skip(kserve.objects):
        for pod in kserve.embedded_pods(doc):
            for version in (oldest, newest):
                assert chart.validate(pod, version) == "", doc["metadata"]["name"]


def test_both_runtimes_are_named_tritium_and_agree(or_skip: Callable[..., Any]) -> None:
    docs = or_skip(kserve.objects)
    runtimes = {
        d["kind"]: d for d in docs if d["metadata"]["name"] == "tritium" and "Runtime" in d["kind"]
    }
    assert set(runtimes) == {"ClusterServingRuntime", "ServingRuntime"}
    assert runtimes["ClusterServingRuntime"]["spec"] == runtimes["ServingRuntime"]["spec"]


def test_the_schema_catches_a_misspelt_field(or_skip: Callable[..., Any]) -> None:
    runtime = next(d for d in or_skip(kserve.objects) if d["kind"] == "ServingRuntime")
    runtime["spec"]["supportedModelFormats"][0]["autoselect"] = True
    problems = or_skip(kserve.check_api, runtime)
    assert any("'autoselect' was unexpected" in p for p in problems)


def test_multi_model_runtime_loads_through_the_repository_api(or_skip: Callable[..., Any]) -> None:
    runtime = next(
        d for d in or_skip(kserve.objects) if d["metadata"]["name"] == "tritium-multimodel"
    )
    assert runtime["spec"]["multiModel"] is True
    assert "--model-control-mode=explicit" in runtime["spec"]["containers"][0]["args"]
