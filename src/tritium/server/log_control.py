"""Carries changes made through the logging extension to everything that writes the log:
the server's own handler, the running workers (a one-way message each) and the workers
started later (``TRITIUM_LOG_SETTINGS`` in the environment they inherit)."""

from __future__ import annotations

import json
import os
from typing import Any

from tritium.backends.python.pb_utils_logger import ENV
from tritium.ipc import messages
from tritium.server import logging_setup
from tritium.service.log_settings import LogSettings
from tritium.service.model.table import ModelTable


def _publish(settings: LogSettings) -> None:
    values = settings.as_json()
    values.pop("log_file", None)
    os.environ[ENV] = json.dumps(values)


def connect(settings: LogSettings, table: ModelTable) -> None:
    _publish(settings)

    def changed(update: dict[str, Any]) -> None:
        logging_setup.apply(update)
        _publish(settings)
        message = messages.LogSettings(update)
        for loaded in table.loaded():
            loaded.post(message)

    settings.on_change(changed)
