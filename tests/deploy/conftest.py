"""Deployment artifacts (deploy/): the fast checks of `make deploy-check`, in the suite.

PyYAML and jsonschema are in the `test` extra, so every check that needs nothing more runs
in `make test`: the KServe objects and the chart's custom resources against their APIs, the
CI value sets against values.schema.json. Rendering and linting the chart needs Helm
(helm-python-sdk, a 75 MB wheel) and Kubernetes' schemas (kubernetes-validate): the `deploy`
extra, which `make deploy-check` installs; the rules need promtool (Debian's prometheus). A
test whose tool is missing is skipped with the reason, printed in the summary (-ra).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
if str(DEPLOY) not in sys.path:
    sys.path.insert(0, str(DEPLOY))

from deploycheck.outcome import Skip  # noqa: E402

T = TypeVar("T")
OrSkip = Callable[..., Any]


def _or_skip(check: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    try:
        return check(*args, **kwargs)
    except Skip as skip:
        pytest.skip(str(skip))


@pytest.fixture
def or_skip() -> OrSkip:
    """``or_skip(step, *args)``: run one deploycheck step; a missing tool skips the test
    with deploycheck's reason."""
    return _or_skip
