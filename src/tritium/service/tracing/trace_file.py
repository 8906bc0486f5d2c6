"""Records sampled requests' timestamps and writes Triton's trace-file JSON.

A trace file is a JSON list; each trace is one object naming the model
(``{"id", "model_name", "model_version", "request_id"?}``) followed by one object per
timestamp (``{"id", "timestamps": [{"name", "ns"}]}``), with Triton's names in order:
REQUEST_START, QUEUE_START, COMPUTE_START, COMPUTE_INPUT_END, COMPUTE_OUTPUT_START,
COMPUTE_END, REQUEST_END. ``ns`` is the monotonic clock, as Triton's steady clock.

With ``log_frequency`` N > 0 every N traces go to ``<trace_file>.<index>``; with 0 they
are kept (at most ``MAX_KEPT``) and written to ``<trace_file>`` at shutdown. Files are
written by a worker thread, never on the event loop.
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

from tritium.core import InferRequest
from tritium.service.model.interface import ServedVersion
from tritium.service.tracing.recorder import Recorder, Window, timestamps
from tritium.service.tracing.settings import TraceSettings

log = logging.getLogger("tritium.trace")

MAX_KEPT = 100_000


class TraceRecorder(Recorder):
    def __init__(self, settings: TraceSettings) -> None:
        self._settings = settings
        self._next_id = 1
        self._kept: list[dict[str, Any]] = []
        self._traces_kept = 0
        self._file_index = 0
        self._writes: set[asyncio.Future[None]] = set()
        self._dropped = False

    def record(
        self, loaded: ServedVersion, request: InferRequest, end: int, window: Window
    ) -> None:
        trace_id = self._next_id
        self._next_id += 1
        head: dict[str, Any] = {
            "id": trace_id,
            "model_name": loaded.name,
            "model_version": loaded.version,
        }
        if request.id:
            head["request_id"] = request.id
        entries = [head] + [
            {"id": trace_id, "timestamps": [{"name": name, "ns": ns}]}
            for name, ns in timestamps(request, end, window)
        ]
        frequency = self._settings.log_frequency
        if frequency == 0 and self._traces_kept >= MAX_KEPT:
            if not self._dropped:
                self._dropped = True
                log.warning("%d traces are waiting for shutdown; dropping later ones", MAX_KEPT)
            return
        self._kept += entries
        self._traces_kept += 1
        if frequency > 0 and self._traces_kept >= frequency:
            self._write(f"{self._settings.trace_file}.{self._file_index}")
            self._file_index += 1

    def _write(self, path: str) -> None:
        entries, self._kept, self._traces_kept = self._kept, [], 0
        loop = asyncio.get_running_loop()
        future = loop.run_in_executor(None, _write_file, path, entries)
        self._writes.add(future)
        future.add_done_callback(self._writes.discard)

    async def close(self) -> None:
        """Write what is kept (``<trace_file>`` when log_frequency is 0) and wait."""
        if self._kept and self._settings.trace_file:
            if self._settings.log_frequency == 0:
                self._write(self._settings.trace_file)
            else:
                self._write(f"{self._settings.trace_file}.{self._file_index}")
                self._file_index += 1
        if self._writes:
            await asyncio.gather(*self._writes, return_exceptions=True)


def _write_file(path: str, entries: list[dict[str, Any]]) -> None:
    try:
        with open(path, "w") as f:
            json.dump(entries, f, separators=(",", ":"))
    except OSError as exc:
        log.error("cannot write trace file '%s': %s", path, exc.strerror)
