"""Helpers for model life-cycle tests and benchmarks (usable against tritium or Triton).

``write_marked_model`` writes a Python-backend model that answers a fixed ``MARK`` (and
its worker's pid), optionally sleeping ``X`` ms per request: a new mark is new code.
``reload_under_load`` keeps clients sending requests while a model is reloaded and reports
failures, the marks answered and the longest pause between two answers.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

MODEL_PY = '''"""Answers MARK {mark} and its pid; sleeps X ms first."""

import os
import time

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        {init}

    def execute(self, requests):
        responses = []
        for request in requests:
            ms = int(pb_utils.get_input_tensor_by_name(request, "X").as_numpy()[0])
            if ms > 0:
                time.sleep(ms / 1000.0)
            responses.append(
                pb_utils.InferenceResponse(
                    [
                        pb_utils.Tensor("MARK", np.array([{mark}], np.int32)),
                        pb_utils.Tensor("PID", np.array([os.getpid()], np.int64)),
                    ]
                )
            )
        return responses
'''

CONFIG = """name: "{name}"
backend: "python"
max_batch_size: 0
input [ {{ name: "X" data_type: TYPE_INT32 dims: [ 1 ] }} ]
output [
  {{ name: "MARK" data_type: TYPE_INT32 dims: [ 1 ] }},
  {{ name: "PID" data_type: TYPE_INT64 dims: [ 1 ] }}
]
instance_group [ {{ kind: KIND_CPU count: {instances} }} ]
{extra}"""


def marked_model_py(mark: int, init: str = "pass") -> str:
    return MODEL_PY.format(mark=mark, init=init)


def marked_config(name: str, instances: int = 1, extra: str = "") -> str:
    return CONFIG.format(name=name, instances=instances, extra=extra)


def write_marked_model(
    repository: Path,
    name: str,
    mark: int,
    *,
    instances: int = 1,
    version: int = 1,
    init: str = "pass",
    extra_config: str = "",
) -> Path:
    """Write (or rewrite) ``repository/name`` answering ``mark``; returns the folder."""
    folder = repository / name
    (folder / str(version)).mkdir(parents=True, exist_ok=True)
    (folder / "config.pbtxt").write_text(marked_config(name, instances, extra_config))
    (folder / str(version) / "model.py").write_text(marked_model_py(mark, init))
    return folder


def marked_inputs(client_module: object, ms: int = 0) -> list[object]:
    """The ``X`` input for ``tritonclient.http`` or ``tritonclient.grpc``."""
    item = client_module.InferInput("X", [1], "INT32")  # type: ignore[attr-defined]
    item.set_data_from_numpy(np.array([ms], np.int32))
    return [item]


@dataclass
class ReloadReport:
    answers: int = 0
    failures: list[str] = field(default_factory=list)
    marks: set[int] = field(default_factory=set)
    longest_pause_s: float = 0.0
    reload_s: list[float] = field(default_factory=list)

    def summary(self) -> str:
        return (
            f"{self.answers} answers, {len(self.failures)} failed, marks {sorted(self.marks)}, "
            f"longest pause {self.longest_pause_s * 1000:.1f} ms, reload times "
            f"{min(self.reload_s):.2f}-{max(self.reload_s):.2f} s"
        )


def reload_under_load(
    http_url: str,
    name: str,
    reload: Callable[[int], None],
    *,
    reloads: int = 20,
    clients: int = 4,
    settle_s: float = 0.3,
) -> ReloadReport:
    """``clients`` threads infer ``name`` back to back while ``reload(i)`` runs for
    i = 1..reloads (it should make the model answer mark i, then return once the load
    call returned). Returns every failure, the marks seen and the longest gap between two
    consecutive answers (from any client) while reloads ran."""
    import tritonclient.http as httpclient

    report = ReloadReport()
    stop = threading.Event()
    lock = threading.Lock()
    stamps: list[float] = []

    def client_loop() -> None:
        client = httpclient.InferenceServerClient(http_url, network_timeout=60.0)
        inputs = marked_inputs(httpclient)
        try:
            while not stop.is_set():
                try:
                    result = client.infer(name, inputs)
                    mark = int(result.as_numpy("MARK")[0])
                except Exception as exc:  # noqa: BLE001 - every failure is reported
                    with lock:
                        report.failures.append(str(exc))
                    continue
                now = time.monotonic()
                with lock:
                    report.answers += 1
                    report.marks.add(mark)
                    stamps.append(now)
        finally:
            client.close()

    threads = [threading.Thread(target=client_loop, daemon=True) for _ in range(clients)]
    for thread in threads:
        thread.start()
    time.sleep(settle_s)
    began = time.monotonic()
    try:
        for i in range(1, reloads + 1):
            start = time.monotonic()
            reload(i)
            report.reload_s.append(time.monotonic() - start)
        time.sleep(settle_s)
    finally:
        ended = time.monotonic()
        stop.set()
        for thread in threads:
            thread.join(60)
    window = sorted(t for t in stamps if began <= t <= ended)
    edges = [began, *window, ended]
    report.longest_pause_s = max(b - a for a, b in zip(edges, edges[1:]))
    return report
