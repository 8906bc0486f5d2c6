"""The KServe objects: their fields against KServe's documented API, their containers and
pods against Kubernetes' own schemas, and the promises the runtimes make to KServe.

KServe's CRDs cannot be installed here (no API server), so deploy/kserve/schema holds the
part of KServe's API these objects use, written from KServe's API reference; what KServe
embeds from Kubernetes (a Container in `spec.containers` and `predictor.model`, a PodSpec
in `predictor`) is checked by wrapping it in a Pod for `kubernetes-validate`.
"""

from __future__ import annotations

import json
from typing import Any

from deploycheck import chart
from deploycheck.outcome import KSERVE

# The arguments KServe's own Triton runtime passes; tritium must take them unchanged.
KSERVE_TRITON_ARGS = [
    "tritonserver",
    "--model-store=/mnt/models",
    "--grpc-port=9000",
    "--http-port=8080",
    "--allow-grpc=true",
    "--allow-http=true",
]


def objects() -> list[dict[str, Any]]:
    chart.need("yaml")
    import yaml

    docs = []
    for path in sorted(KSERVE.glob("*.yaml")):
        docs += [d for d in yaml.safe_load_all(path.read_text()) if d]
    return docs


def schema() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((KSERVE / "schema" / "kserve.schema.json").read_text())
    return loaded


def check_api(doc: dict[str, Any]) -> list[str]:
    """Problems of `doc` against KServe's API (the schema file), by field path."""
    chart.need("jsonschema")
    import jsonschema

    full = schema()
    kind = doc.get("kind", "")
    if kind not in full["definitions"]:
        return [f"{kind}: not a KServe kind this check knows"]
    validator = jsonschema.Draft7Validator({**full["definitions"][kind], "definitions": {}})
    name = doc.get("metadata", {}).get("name")
    return [
        f"{kind} {name}: {'/'.join(str(p) for p in e.absolute_path)}: {e.message}"
        for e in validator.iter_errors(doc)
    ]


def embedded_pods(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """Pods made of what `doc` embeds from core/v1, for Kubernetes' schema."""
    kind = doc["kind"]
    spec = doc.get("spec", {})
    if kind in ("ServingRuntime", "ClusterServingRuntime"):
        pod_spec = {
            k: spec[k]
            for k in (
                "containers",
                "volumes",
                "nodeSelector",
                "affinity",
                "tolerations",
                "imagePullSecrets",
                "hostIPC",
            )
            if k in spec
        }
    elif kind == "InferenceService":
        extra = schema()["x-kserve-fields"]
        predictor = spec.get("predictor", {})
        model = {k: v for k, v in predictor.get("model", {}).items() if k not in extra["model"]}
        container = {"name": "kserve-container", "image": "tritium", **model}
        pod_spec = {k: v for k, v in predictor.items() if k not in extra["predictor"]}
        pod_spec["containers"] = [container, *pod_spec.get("containers", [])]
    else:
        return []
    return [
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": doc["metadata"]["name"]},
            "spec": pod_spec,
        }
    ]


def runtime_promises(doc: dict[str, Any]) -> list[str]:
    """What issue #30 asks of the tritium runtimes, checked field by field."""
    if doc["kind"] not in ("ServingRuntime", "ClusterServingRuntime"):
        return []
    name = doc["metadata"]["name"]
    spec = doc["spec"]
    problems = []
    if (
        doc["metadata"].get("annotations", {}).get("serving.kserve.io/server-type")
        != "tritonserver"
    ):
        problems.append(f"{name}: annotation serving.kserve.io/server-type is not tritonserver")
    formats = {f["name"]: f for f in spec.get("supportedModelFormats", [])}
    if "triton" not in formats or formats["triton"].get("autoSelect") is not False:
        problems.append(f"{name}: the triton format must be listed with autoSelect: false")
    if "tritium" not in formats:
        problems.append(f"{name}: its own format 'tritium' is missing")
    if sorted(spec.get("protocolVersions", [])) != ["grpc-v2", "v2"]:
        problems.append(f"{name}: protocolVersions must be v2 and grpc-v2")
    container = spec["containers"][0]
    if container.get("name") != "kserve-container":
        problems.append(f"{name}: KServe expects the container to be named kserve-container")
    if container.get("args", [])[: len(KSERVE_TRITON_ARGS)] != KSERVE_TRITON_ARGS:
        problems.append(f"{name}: args do not start with KServe's Triton arguments")
    explicit = "--model-control-mode=explicit" in container.get("args", [])
    if bool(spec.get("multiModel")) != explicit:
        problems.append(f"{name}: multiModel and --model-control-mode=explicit go together")
    for probe in ("startupProbe", "readinessProbe"):
        get = container.get(probe, {}).get("httpGet", {})
        if get.get("path") != "/v2/health/ready" or get.get("port") != 8080:
            problems.append(f"{name}: {probe} is not GET /v2/health/ready on 8080")
    if "preStop" not in container.get("lifecycle", {}):
        problems.append(f"{name}: no preStop hook")
    return problems
