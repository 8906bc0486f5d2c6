"""A model's own Python environment (``EXECUTION_ENV_PATH``): its workers run under the
environment's interpreter, and an unusable environment fails the load with the reason.

The "environment" is built by the test: a folder whose ``bin/python3`` is a shell script
that records each start, marks the process's environment and execs this interpreter
(numpy and msgspec are therefore there), packed with ``tarfile``.
"""

from __future__ import annotations

import asyncio
import io
import subprocess
import sys
import tarfile
from pathlib import Path

import numpy as np
import pytest

from tritium.core import InferRequest, InputTensor
from tritium.core.errors import TritiumError
from tritium.testing.in_process import serving

MODEL_PY = """
import os
import sys
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        marked = os.environ.get("PACKED_ENV_MARK") == "yes" or sys.prefix.endswith("venv_env")
        marked = 1 if marked else 0
        return [
            pb_utils.InferenceResponse(
                [pb_utils.Tensor("Y", np.array([marked], np.int32))]
            )
            for _ in requests
        ]
"""

CONFIG = """
name: "{name}"
backend: "python"
max_batch_size: 0
input [ {{ name: "X" data_type: TYPE_INT32 dims: [ 1 ] }} ]
output [ {{ name: "Y" data_type: TYPE_INT32 dims: [ 1 ] }} ]
instance_group [ {{ kind: KIND_CPU count: 1 }} ]
parameters: {{ key: "EXECUTION_ENV_PATH", value: {{ string_value: "{path}" }} }}
"""

WRAPPER = f"""#!/bin/sh
echo "$@" >> "$(dirname "$0")/../started"
PACKED_ENV_MARK=yes exec {sys.executable} "$@"
"""


def _model(repo: Path, name: str, path: str) -> Path:
    folder = repo / name
    (folder / "1").mkdir(parents=True)
    (folder / "1" / "model.py").write_text(MODEL_PY)
    (folder / "config.pbtxt").write_text(CONFIG.format(name=name, path=path))
    return folder


def _pack(archive: Path, files: dict[str, tuple[bytes, int]]) -> None:
    with tarfile.open(archive, "w:gz") as tar:
        for name, (data, mode) in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            info.mode = mode
            tar.addfile(info, io.BytesIO(data))


def _infer(name: str) -> InferRequest:
    data = np.array([1], np.int32)
    return InferRequest(name, "", "1", [InputTensor("X", "INT32", (1,), data)])


@pytest.fixture(autouse=True)
def _cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    cache = tmp_path / "cache"
    monkeypatch.setenv("TRITIUM_EXECUTION_ENV_CACHE", str(cache))
    return cache


def test_workers_run_under_the_packed_environments_interpreter(tmp_path: Path, _cache: Path):
    repo = tmp_path / "models"
    folder = _model(repo, "packed", "$$TRITON_MODEL_DIRECTORY/env.tar.gz")
    _pack(folder / "env.tar.gz", {"bin/python3": (WRAPPER.encode(), 0o755)})

    async def main() -> list[int]:
        async with serving([repo], {"packed"}) as (_, service):
            response = await asyncio.wait_for(service.submit(_infer("packed")), 60)
            return response.outputs[0].data.tolist()

    assert asyncio.run(main()) == [1]  # the worker saw the wrapper's mark
    unpacked = [p for p in _cache.iterdir() if p.name.startswith("env-")]
    assert len(unpacked) == 1  # unpacked once, into the cache
    started = (unpacked[0] / "started").read_text()
    assert "tritium.backends.python.stub" in started  # the worker ran under bin/python3

    async def again() -> None:  # a second load reuses the unpacked folder
        async with serving([repo], {"packed"}) as (_, service):
            await asyncio.wait_for(service.submit(_infer("packed")), 60)

    asyncio.run(again())
    assert [p.name for p in _cache.iterdir() if p.name.startswith("env-")] == [unpacked[0].name]


async def _load_error(repo: Path, name: str) -> str:
    async with serving([repo]) as (manager, _):
        with pytest.raises(TritiumError) as caught:
            await manager.load(name)
        return caught.value.message


def test_a_missing_archive_fails_the_load_with_the_reason(tmp_path: Path):
    repo = tmp_path / "models"
    _model(repo, "missing", "$$TRITON_MODEL_DIRECTORY/nowhere.tar.gz")
    message = asyncio.run(_load_error(repo, "missing"))
    assert "failed to load 'missing'" in message
    assert "EXECUTION_ENV_PATH" in message and "nowhere.tar.gz" in message
    assert "No such file or directory" in message


def test_an_archive_member_outside_it_is_refused(tmp_path: Path, _cache: Path):
    repo = tmp_path / "models"
    folder = _model(repo, "escaping", "$$TRITON_MODEL_DIRECTORY/env.tar.gz")
    _pack(
        folder / "env.tar.gz",
        {"bin/python3": (WRAPPER.encode(), 0o755), "../escaped": (b"x", 0o644)},
    )
    message = asyncio.run(_load_error(repo, "escaping"))
    assert "failed to load 'escaping'" in message
    assert "'../escaped'" in message and "outside" in message
    assert not (_cache.parent / "escaped").exists()
    assert not [p for p in _cache.iterdir() if p.name.startswith("env-")]


def test_an_environment_without_an_interpreter_is_refused(tmp_path: Path):
    repo = tmp_path / "models"
    folder = _model(repo, "nopython", "$$TRITON_MODEL_DIRECTORY/env.tar.gz")
    _pack(folder / "env.tar.gz", {"README": (b"no interpreter here", 0o644)})
    message = asyncio.run(_load_error(repo, "nopython"))
    assert "failed to load 'nopython'" in message and "has no bin/python3" in message


def test_an_interpreter_that_cannot_run_a_worker_is_refused(tmp_path: Path):
    repo = tmp_path / "models"
    folder = _model(repo, "broken", "$$TRITON_MODEL_DIRECTORY/env.tar.gz")
    script = b"#!/bin/sh\necho 'ModuleNotFoundError: No module named numpy' >&2\nexit 1\n"
    _pack(folder / "env.tar.gz", {"bin/python3": (script, 0o755)})
    message = asyncio.run(_load_error(repo, "broken"))
    assert "failed to load 'broken'" in message
    assert "cannot run a worker" in message and "numpy" in message


def test_an_unpacked_virtual_environment_folder_is_used_as_it_is(tmp_path: Path):
    """A real interpreter: a venv of this Python's base installation, made now. numpy comes
    from its system site-packages; it has no msgspec, so the server lends its own."""
    base = getattr(sys, "_base_executable", sys.executable)
    env = tmp_path / "venv_env"
    made = subprocess.run(
        [base, "-m", "venv", "--system-site-packages", "--without-pip", str(env)],
        capture_output=True,
        check=False,
    )
    check = subprocess.run([str(env / "bin" / "python3"), "-c", "import numpy"], check=False)
    if made.returncode != 0 or check.returncode != 0:
        pytest.skip("no venv with numpy can be made from this Python's base installation")
    repo = tmp_path / "models"
    _model(repo, "venv_model", str(env))

    async def main() -> list[int]:
        async with serving([repo], {"venv_model"}) as (_, service):
            response = await asyncio.wait_for(service.submit(_infer("venv_model")), 60)
            return response.outputs[0].data.tolist()

    assert asyncio.run(main()) == [1]  # the worker's sys.prefix is the venv's
