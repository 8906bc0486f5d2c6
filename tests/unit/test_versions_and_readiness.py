"""Version strings as Triton 2.51 reads them, and the reasons the service gives for not
being ready (which Triton does not give: its ``/v2/health/ready`` body is empty)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tritium import repository as repo
from tritium.core.errors import InvalidArgument, NotFound
from tritium.server.app import build_service
from tritium.service import ModelTable
from tritium.service.model.entry import ModelEntry, VersionStatus
from tritium.service.model.table import version_number

STOL = (
    "failed to get model version from specified version string '{}' (details: stol), "
    "version should be an integral value > 0"
)


@pytest.mark.parametrize(
    "text,number",
    [("1", 1), ("007", 7), (" +3", 3), ("1x", 1), ("-0", 0), ("9223372036854775807", 2**63 - 1)],
)
def test_version_number_reads_like_stol(text, number):
    assert version_number(text) == number


@pytest.mark.parametrize("text", ["wrong_specification", "x1", " ", "99999999999999999999"])
def test_version_number_refuses_what_stol_refuses(text):
    with pytest.raises(InvalidArgument) as info:
        version_number(text)
    assert info.value.message == STOL.format(text)


def test_negative_version_is_invalid():
    with pytest.raises(InvalidArgument) as info:
        version_number("-1")
    assert info.value.message == (
        "invalid model version specified '-1' , version should be an integral value > 0"
    )


def _table(*entries: ModelEntry, into: ModelTable | None = None) -> ModelTable:
    table = into if into is not None else ModelTable()
    for entry in entries:
        table.models[entry.name] = entry
    return table


def _entry(name: str, state: str, reason: str = "", **versions: VersionStatus) -> ModelEntry:
    entry = ModelEntry(
        name, repo.ModelSource(name, Path(), Path()), state=state, reason=reason, wanted=True
    )
    entry.versions = {status.version: status for status in versions.values()}
    return entry


def test_get_names_the_parsed_version():
    manager = _table(_entry("m", "UNAVAILABLE", "broken", v1=VersionStatus(1, "UNAVAILABLE")))
    with pytest.raises(NotFound) as info:
        manager.get("m", "007")
    assert info.value.message == "Request for unknown model: 'm' version 7 is not found"
    with pytest.raises(InvalidArgument) as bad:
        manager.get("m", "wrong_specification")
    assert bad.value.message == STOL.format("wrong_specification")


def test_not_ready_reasons_name_each_model_and_why():
    manager = _table(
        _entry("b_failed", "UNAVAILABLE", v1=VersionStatus(1, "UNAVAILABLE", "weights are missing")),
        _entry("a_no_versions", "UNAVAILABLE", "no version could be loaded"),
        _entry("c_loading", "LOADING", v2=VersionStatus(2, "LOADING")),
    )
    assert not manager.all_ready()
    assert manager.not_ready_reasons() == [
        "model 'a_no_versions' is UNAVAILABLE: no version could be loaded",
        "model 'b_failed' version 1 is UNAVAILABLE: weights are missing",
        "model 'c_loading' version 2 is LOADING",
    ]


def test_service_not_ready_reason():
    wiring = build_service([])
    _table(
        _entry("bad", "UNAVAILABLE", v1=VersionStatus(1, "UNAVAILABLE", "weights are missing")),
        into=wiring.table,
    )
    service = wiring.service
    assert service.not_ready_reason() == "the server is starting: models are still loading"
    service.started = True
    assert not service.ready()
    assert service.not_ready_reason() == (
        "the server is not ready because not every model is ready (--strict-readiness=true): "
        "model 'bad' version 1 is UNAVAILABLE: weights are missing"
    )
    service.stopping = True
    assert service.not_ready_reason() == "the server is shutting down"
