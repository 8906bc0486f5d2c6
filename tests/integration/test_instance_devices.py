"""A device per instance for any accelerator (``tritium.device_ids``,
``tritium.device_env``): each instance's ``initialize(args)`` gets its id round robin,
and its worker has the environment variable set before model.py is imported.

The model reports what it saw (the variable at import, its args) both as outputs and in a
file per instance, so every instance is checked, not only the one a request reaches.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
from pathlib import Path

import numpy as np
import pytest

from tritium.core import InferRequest, InputTensor
from tritium.core.errors import TritiumError
from tritium.service import LoadOptions
from tritium.testing.in_process import serving

ENV = "TRITIUM_TEST_DEVICE"

MODEL_PY = f"""
import json
import os
from pathlib import Path

import numpy as np
import triton_python_backend_utils as pb_utils

AT_IMPORT = os.environ.get("{ENV}", "unset")  # read before anything else runs


class TritonPythonModel:
    def initialize(self, args):
        self.device = args["model_instance_device_id"]
        seen = Path(args["model_repository"]) / "seen"
        seen.mkdir(exist_ok=True)
        record = {{
            "at_import": AT_IMPORT,
            "device_id": self.device,
            "kind": args["model_instance_kind"],
            "pid": os.getpid(),
        }}
        name = args["model_instance_name"] + "@" + self.device
        # Written whole, then renamed: a test polling the folder never reads half a record.
        part = seen / (name + ".part")
        part.write_text(json.dumps(record))
        part.rename(seen / (name + ".json"))

    def execute(self, requests):
        return [
            pb_utils.InferenceResponse([
                pb_utils.Tensor("AT_IMPORT", np.array([AT_IMPORT.encode()], np.object_)),
                pb_utils.Tensor("DEVICE", np.array([self.device.encode()], np.object_)),
            ])
            for _ in requests
        ]
"""

CONFIG = """
name: "{name}"
backend: "python"
input [ {{ name: "X" data_type: TYPE_INT32 dims: [ 1 ] }} ]
output [ {{ name: "AT_IMPORT" data_type: TYPE_STRING dims: [ 1 ] }},
         {{ name: "DEVICE" data_type: TYPE_STRING dims: [ 1 ] }} ]
instance_group [ {{ kind: KIND_CPU count: 3 }}, {{ kind: KIND_MODEL count: 1 }} ]
{parameters}
"""


def _model(repo: Path, name: str, parameters: dict[str, str]) -> Path:
    folder = repo / name
    (folder / "1").mkdir(parents=True)
    (folder / "1" / "model.py").write_text(MODEL_PY)
    text = "\n".join(
        f'parameters: {{ key: "{k}" value: {{ string_value: "{v}" }} }}'
        for k, v in parameters.items()
    )
    (folder / "config.pbtxt").write_text(CONFIG.format(name=name, parameters=text))
    return folder


def _infer(name: str) -> InferRequest:
    data = np.array([1], np.int32)
    return InferRequest(name, "", "1", [InputTensor("X", "INT32", (1,), data)])


def _seen(folder: Path) -> dict[str, dict[str, object]]:
    return {p.stem: json.loads(p.read_text()) for p in (folder / "seen").glob("*.json")}


def test_instances_get_device_ids_round_robin_and_the_variable_before_import(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="tritium.models")
    repo = tmp_path / "models"
    folder = _model(repo, "npu", {"tritium.device_ids": "5,7", "tritium.device_env": ENV})

    async def main() -> list[list[bytes]]:
        async with serving([repo], {"npu"}) as (_, service):
            response = await asyncio.wait_for(service.submit(_infer("npu")), 60)
            return [o.data.tolist() for o in response.outputs]

    at_import, device = asyncio.run(main())
    assert at_import == device  # the instance that answered saw its own id at import
    seen = _seen(folder)
    # Triton's instance names and order; the ids continue round robin across groups.
    assert set(seen) == {"npu_0_0@5", "npu_0_1@7", "npu_0_2@5", "npu_1_0@7"}
    assert all(r["at_import"] == r["device_id"] for r in seen.values())
    assert seen["npu_1_0@7"]["kind"] == "MODEL" and seen["npu_0_0@5"]["kind"] == "CPU"
    assert len({r["pid"] for r in seen.values()}) == 4  # a worker per instance
    # Logged at load in Triton's words, with the variable set for the instance.
    line = "TRITONBACKEND_ModelInstanceInitialize: npu_0_1 (CPU device 7, TRITIUM_TEST_DEVICE=7)"
    assert line in caplog.text


def test_without_the_variable_parameter_ids_still_reach_the_instances(tmp_path: Path) -> None:
    repo = tmp_path / "models"
    folder = _model(repo, "ids", {"tritium.device_ids": "2"})

    async def main() -> None:
        async with serving([repo], {"ids"}) as (_, service):
            await asyncio.wait_for(service.submit(_infer("ids")), 60)

    asyncio.run(main())
    seen = _seen(folder)
    assert {r["device_id"] for r in seen.values()} == {"2"}
    assert {r["at_import"] for r in seen.values()} == {"unset"}


@pytest.mark.parametrize(
    ("parameters", "expected"),
    [
        ({"tritium.device_ids": "0,x"}, "parameter 'tritium.device_ids' must list device ids"),
        ({"tritium.device_env": ENV}, "parameter 'tritium.device_env' needs device ids"),
        (
            {"tritium.device_ids": "0", "tritium.device_env": "NOT A NAME"},
            "must be an environment variable name",
        ),
    ],
)
def test_invalid_device_parameters_fail_the_load_naming_them(
    tmp_path: Path, parameters: dict[str, str], expected: str
) -> None:
    repo = tmp_path / "models"
    _model(repo, "bad", parameters)

    async def main() -> str:
        async with serving([repo]) as (manager, _):
            with pytest.raises(TritiumError) as caught:
                await manager.load("bad")
            return caught.value.message

    assert expected in asyncio.run(main())


def test_a_restarted_instance_gets_its_device_again(tmp_path: Path) -> None:
    repo = tmp_path / "models"
    folder = _model(repo, "again", {"tritium.device_ids": "3,4", "tritium.device_env": ENV})

    async def main() -> dict[str, object]:
        async with serving([repo], {"again"}) as (_, service):
            first = _seen(folder)["again_0_1@4"]
            os.kill(int(first["pid"]), signal.SIGKILL)  # type: ignore[call-overload]
            loop = asyncio.get_running_loop()
            deadline = loop.time() + 60
            while loop.time() < deadline:
                record = _seen(folder).get("again_0_1@4", first)
                if record["pid"] != first["pid"]:
                    await asyncio.wait_for(service.submit(_infer("again")), 60)
                    return record
                await asyncio.sleep(0.05)
            raise AssertionError("the killed instance was not started again within 60 s")

    record = asyncio.run(main())
    assert record["device_id"] == "4" and record["at_import"] == "4"


def test_kind_gpu_instances_get_their_gpu_ids_as_in_triton(tmp_path: Path) -> None:
    """Where GPUs exist (two, told to the loader here): each count index on each GPU."""
    repo = tmp_path / "models"
    folder = _model(repo, "gpu", {"tritium.device_env": ENV})
    config = (folder / "config.pbtxt").read_text()
    groups = "instance_group [ { kind: KIND_CPU count: 3 }, { kind: KIND_MODEL count: 1 } ]"
    gpus = "instance_group [ { kind: KIND_GPU count: 1 gpus: [ 0, 1 ] } ]"
    (folder / "config.pbtxt").write_text(config.replace(groups, gpus))

    async def main() -> None:
        async with serving([repo], {"gpu"}, LoadOptions(gpu_count=2)) as (_, service):
            await asyncio.wait_for(service.submit(_infer("gpu")), 60)

    asyncio.run(main())
    # Triton names both instances of the group's count index 0 "gpu_0_0", one per GPU.
    seen = _seen(folder)
    assert set(seen) == {"gpu_0_0@0", "gpu_0_0@1"}
    assert all(r["kind"] == "GPU" and r["at_import"] == r["device_id"] for r in seen.values())
    assert len({r["pid"] for r in seen.values()}) == 2
