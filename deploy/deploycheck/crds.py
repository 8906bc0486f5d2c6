"""The chart's custom resources (KEDA ScaledObject, Prometheus Operator ServiceMonitor,
PodMonitor and PrometheusRule, Istio DestinationRule) against their projects' APIs.

No API server can install their CRDs here and none is downloaded: schema/crds.schema.json
holds the part of each API these objects use, written from the projects' documented API
references, strict (an unknown or misspelt field fails, as a structural CRD schema with
pruning would silently drop it).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from deploycheck import chart

SCHEMA = Path(__file__).resolve().parent / "schema" / "crds.schema.json"


def schema() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(SCHEMA.read_text())
    return loaded


def kinds() -> list[str]:
    """The custom kinds this check knows."""
    return sorted(schema()["definitions"])


def check(doc: dict[str, Any]) -> list[str]:
    """Problems of the custom resource ``doc`` against its project's API, by field path."""
    chart.need("jsonschema")
    import jsonschema

    definitions = schema()["definitions"]
    kind = doc.get("kind", "")
    if kind not in definitions:
        return [f"{kind}: not a custom kind this check knows"]
    validator = jsonschema.Draft7Validator(definitions[kind])
    name = doc.get("metadata", {}).get("name")
    return [
        f"{kind} {name}: {'/'.join(str(p) for p in e.absolute_path) or '.'}: {e.message}"
        for e in sorted(validator.iter_errors(doc), key=lambda e: list(map(str, e.path)))
    ]
