"""The model manager's dependency hook: a model's dependencies (an ensemble's steps) load
before it, and ``unload_dependents`` unloads those no other loaded model still needs.

The hook is ``tritium.service.lifecycle.dependencies.model_dependencies``; ensembles are its real
users, here a stand-in maps plain models to dependencies.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from tritium.service import ModelManager, Service
from tritium.service.lifecycle import manager as models_module
from tritium.testing.in_process import serving
from tritium.testing.lifecycle import write_marked_model

GRAPH = {"top": ["left", "right"], "other": ["right"]}


def _dependencies(config: Any) -> list[str]:
    name = config["name"] if isinstance(config, dict) else config.name
    return GRAPH.get(name, [])


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setattr(models_module, "model_dependencies", _dependencies)
    for mark, name in enumerate(("top", "left", "right", "other")):
        write_marked_model(tmp_path, name, mark)
    return tmp_path


def _run(repo: Path, body: Any) -> None:
    async def main() -> None:
        async with serving([repo], model_control_mode="explicit") as (manager, service):
            await body(manager, service)

    asyncio.run(main())


def _loaded(manager: ModelManager) -> set[str]:
    return {name for name, entry in manager.models.items() if entry.has_loaded()}


def test_dependencies_load_first_and_unload_with_their_dependent(repo):
    async def body(manager: ModelManager, service: Service) -> None:
        await service.load_model("top")
        assert _loaded(manager) == {"top", "left", "right"}
        await service.load_model("other")
        # "right" is still needed by "other"; "left" is not.
        await service.unload_model("top", unload_dependents=True)
        assert _loaded(manager) == {"right", "other"}
        await service.unload_model("other")
        assert _loaded(manager) == {"right"}

    _run(repo, body)


def test_unload_without_dependents_keeps_them(repo):
    async def body(manager: ModelManager, service: Service) -> None:
        await service.load_model("top")
        await service.unload_model("top")
        assert _loaded(manager) == {"left", "right"}

    _run(repo, body)


def test_a_dependency_cycle_is_refused(repo):
    GRAPH["left"] = ["top"]
    try:

        async def body(manager: ModelManager, service: Service) -> None:
            from tritium.core.errors import InvalidArgument

            with pytest.raises(InvalidArgument, match="circular dependency"):
                await service.load_model("top")
            assert _loaded(manager) == set()

        _run(repo, body)
    finally:
        del GRAPH["left"]
