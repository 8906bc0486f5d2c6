"""The Helm chart: render it for its value sets, lint it, validate what it renders.

Helm itself comes from the `helm-python-sdk` wheel (Helm's Go SDK behind a C ABI): no
`helm` binary, no cluster and no network. Rendered objects of built-in kinds are checked
against Kubernetes' OpenAPI schemas (`kubernetes-validate`, strict: unknown fields fail)
for the oldest and the newest Kubernetes version that package bundles.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

from deploycheck.outcome import CHART, Skip

RELEASE = "tritium"
NAMESPACE = "deploy-check"
# Kinds that come from CRDs; kubernetes-validate knows only built-in kinds.
CRD_GROUPS = ("monitoring.coreos.com/", "keda.sh/", "networking.istio.io/", "serving.kserve.io/")


def need(*modules: str) -> None:
    missing = [m for m in modules if importlib.util.find_spec(m) is None]
    if missing:
        raise Skip(
            f"Python module(s) {', '.join(missing)} not installed "
            "(pip install -e '.[deploy]'; make deploy-check installs them)"
        )


def value_sets() -> dict[str, dict[str, Any]]:
    """The chart's main value sets (ci/*-values.yaml), by name."""
    need("yaml")
    import yaml

    sets = {}
    for path in sorted((CHART / "ci").glob("*-values.yaml")):
        sets[path.name.removesuffix("-values.yaml")] = yaml.safe_load(path.read_text()) or {}
    return sets


def render(values: dict[str, Any], *, chart: Path = CHART) -> list[dict[str, Any]]:
    """The objects the chart renders with `values` (templates that render nothing omitted)."""
    need("helm_python", "yaml")
    import helm_python
    import yaml

    with helm_python.Chart.load(chart) as loaded:
        loaded.validate_schema(values)
        manifests = loaded.render(values=values, name=RELEASE, namespace=NAMESPACE)
    docs = []
    for name, text in sorted(manifests.items()):
        if name.endswith("NOTES.txt"):
            continue
        for doc in yaml.safe_load_all(text):
            if doc:
                docs.append(doc)
    return docs


def render_error(values: dict[str, Any]) -> str:
    """The message with which rendering `values` fails ('' if it renders)."""
    need("helm_python")
    import helm_python

    try:
        render(values)
    except helm_python.HelmError as exc:
        return str(exc)
    return ""


def lint(values: dict[str, Any] | None = None) -> list[str]:
    """`helm lint --strict` findings at warning level and above."""
    need("helm_python")
    import helm_python

    report = helm_python.lint(CHART, values, strict=True)
    found = [f"{m['path']}: {m['error']}" for m in report["messages"] if m["severity"] >= 2]
    return found + list(report.get("errors") or [])


def kubernetes_versions() -> tuple[str, str]:
    """The oldest and newest Kubernetes versions kubernetes-validate bundles schemas for."""
    need("kubernetes_validate")
    from kubernetes_validate import utils

    versions = utils.all_versions()
    return versions[0], versions[-1]


def is_builtin(doc: dict[str, Any]) -> bool:
    return not str(doc.get("apiVersion", "")).startswith(CRD_GROUPS)


def validate(doc: dict[str, Any], version: str) -> str:
    """'' when `doc` is valid for Kubernetes `version`, else the first problem."""
    need("kubernetes_validate")
    import kubernetes_validate
    from kubernetes_validate import utils

    try:
        kubernetes_validate.validate(doc, version, strict=True)
    except utils.ValidationError as exc:
        where = "/".join(str(p) for p in exc.absolute_path)
        return f"{doc['kind']} {doc['metadata'].get('name')}: {where}: {exc.message}"
    except utils.SchemaNotFoundError as exc:
        return f"{doc['kind']}: {exc.message}"
    return ""
