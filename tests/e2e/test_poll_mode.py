"""``--model-control-mode=poll``: the server follows the repository (added versions and
models load, removed ones unload, a broken change leaves the old version serving with the
reason in the index, a broken new version is listed UNAVAILABLE beside it), and refuses the
load/unload API as Triton does."""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable
from pathlib import Path

import pytest
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from tritium.testing import ServerProcess
from tritium.testing.lifecycle import marked_inputs, write_marked_model


def _place(repo: Path, staging: Path, name: str, mark: int, **kwargs: object) -> None:
    """Write a model (or version) beside the repository, then move it in: a new model
    whole, a changed one file by file (a rename over a file is atomic), so a scan never
    sees half a file nor a version folder that is briefly missing."""
    write_marked_model(staging, name, mark, **kwargs)  # type: ignore[arg-type]
    _merge(staging / name, repo / name)


def _merge(source: Path, target: Path) -> None:
    if not target.exists():
        source.rename(target)
        return
    for item in source.iterdir():
        if item.is_dir():
            _merge(item, target / item.name)
        else:
            item.rename(target / item.name)
    shutil.rmtree(source)


def _eventually(check: Callable[[], bool], timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            if check():
                return
        except InferenceServerException:
            pass
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached in time")
        time.sleep(0.1)


def _mark(client: httpclient.InferenceServerClient, name: str) -> int:
    return int(client.infer(name, marked_inputs(httpclient)).as_numpy("MARK")[0])


def _entries(client: httpclient.InferenceServerClient, name: str) -> list[dict]:
    return [m for m in client.get_model_repository_index() if m["name"] == name]


def test_poll_mode_follows_the_repository(tmp_path):
    repo, staging = tmp_path / "repo", tmp_path / "staging"
    repo.mkdir()
    staging.mkdir()
    write_marked_model(repo, "alpha", 1)
    args = ["--model-control-mode=poll", "--repository-poll-secs=1"]
    with ServerProcess([repo], args) as server:
        client = httpclient.InferenceServerClient(server.http_url)
        assert _mark(client, "alpha") == 1

        # The API is Triton's "not allowed" in poll mode.
        with pytest.raises(InferenceServerException) as info:
            client.load_model("alpha")
        assert "explicit model load / unload is not allowed if polling is enabled" in str(
            info.value
        )

        # An added version replaces the old one (default policy: latest 1).
        _place(repo, staging, "alpha", 2, version=2)
        _eventually(lambda: _mark(client, "alpha") == 2)
        _eventually(
            lambda: (
                _entries(client, "alpha")
                == [
                    {"name": "alpha", "version": "1", "state": "UNAVAILABLE", "reason": "unloaded"},
                    {"name": "alpha", "version": "2", "state": "READY"},
                ]
            )
        )

        # An added model loads; a removed one unloads.
        _place(repo, staging, "beta", 7)
        _eventually(lambda: _mark(client, "beta") == 7)
        shutil.rmtree(repo / "beta")
        _eventually(lambda: not client.is_model_ready("beta"))
        _eventually(lambda: _entries(client, "beta") == [])  # gone from the index too

        # A broken change keeps the old version serving, with the reason in the index.
        _place(repo, staging, "alpha", 3, version=2, init="raise RuntimeError('broken change')")
        _eventually(lambda: "broken change" in _entries(client, "alpha")[-1].get("reason", ""))
        assert _mark(client, "alpha") == 2
        assert _entries(client, "alpha")[-1]["state"] == "READY"
        assert client.is_server_ready()

        # Fixed: the next scan loads it.
        _place(repo, staging, "alpha", 4, version=2)
        _eventually(lambda: _mark(client, "alpha") == 4)

        # A new version that fails keeps the serving one READY and is listed on its own,
        # UNAVAILABLE with its reason, as Triton lists it: one whose initialize raises...
        _place(repo, staging, "alpha", 5, version=5, init="raise RuntimeError('broken v5')")
        _eventually(lambda: _entries(client, "alpha")[-1].get("state") == "UNAVAILABLE")
        v1, v2, v5 = _entries(client, "alpha")
        assert v2 == {"name": "alpha", "version": "2", "state": "READY"}
        assert v5["version"] == "5" and v5["state"] == "UNAVAILABLE"
        assert "broken v5" in v5["reason"]
        assert _mark(client, "alpha") == 4
        # ... and one whose model.py cannot even be imported.
        (staging / "alpha" / "6").mkdir(parents=True)
        (staging / "alpha" / "6" / "model.py").write_text("this is not python(\n")
        _merge(staging / "alpha", repo / "alpha")
        _eventually(
            lambda: [e.get("state") for e in _entries(client, "alpha")][3:] == ["UNAVAILABLE"]
        )
        v6 = _entries(client, "alpha")[-1]
        assert v6["version"] == "6" and v6["state"] == "UNAVAILABLE"
        assert "SyntaxError" in v6["reason"]
        assert _entries(client, "alpha")[1] == v2
        assert _mark(client, "alpha") == 4
        client.close()
