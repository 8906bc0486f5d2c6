"""The example add_sub model as the in-process microbenchmarks use it: its configuration,
and a fake loaded model whose instance answers at once (no worker process)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from tritium.config import complete_config, config_to_json, load_config_file
from tritium.core import InferResponse, OutputTensor
from tritium.core.statistics import ModelStatistics
from tritium.scheduling import DefaultScheduler
from tritium.service.model.signature import signature_from_config

EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "model_repository"
#: The example's configuration, completed as the model manager completes it.
CONFIG = config_to_json(
    complete_config(load_config_file(EXAMPLES / "add_sub", "add_sub"), "add_sub")  # type: ignore[arg-type]
)


class InstantInstance:
    """A runner that computes add_sub in process and completes immediately."""

    name = "add_sub_0"
    running = True

    def submit(self, batch):
        done = asyncio.get_running_loop().create_future()
        request = batch[0]
        a, b = request.inputs[0].data, request.inputs[1].data
        outputs = [
            OutputTensor("OUTPUT0", "FP32", (4,), a + b),
            OutputTensor("OUTPUT1", "FP32", (4,), a - b),
        ]
        done.set_result([InferResponse(request.model_name, "1", request.id, outputs)])
        return done

    def cancel(self, request) -> None: ...

    def when_ready(self, callback) -> None:
        callback()

    def on_restart_failure(self, callback) -> None: ...


class _Loaded:
    name = "add_sub"
    version_str = "1"
    config = CONFIG
    decoupled = False
    reshaper = None
    cache = None
    classifier = None

    def __init__(self) -> None:
        self.signature = signature_from_config(CONFIG)
        self.scheduler = DefaultScheduler([InstantInstance()])
        self.stats = ModelStatistics()


class InstantModels:
    """What the submitter needs of its model table: add_sub, served by an InstantInstance."""

    def __init__(self) -> None:
        self.loaded = _Loaded()
        self.models: dict[str, object] = {}  # no entries: nothing for the manager to load

    def get(self, name: str, version: str) -> _Loaded:
        return self.loaded

    def __contains__(self, name: object) -> bool:
        return name == "add_sub"

#: The worker's load message for add_sub (what the model manager sends).
LOAD_SPEC = {
    "model_name": "add_sub",
    "model_version": "1",
    "model_dir": str(EXAMPLES / "add_sub"),
    "config": CONFIG,
    "auto_complete": False,
}
