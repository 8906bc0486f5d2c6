"""Model life-cycle settings read from ``--backend-config=python,<setting>=<value>``.

``initialize-timeout-seconds``: how long importing model.py and each instance's
``initialize()`` may take before the version is UNAVAILABLE (default 600).
``restart-limit`` / ``restart-window-seconds``: an instance that exits (or fails to
restart) this many times within the window is not restarted again and its version is
UNAVAILABLE with the reason (defaults 5 and 60).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from tritium.workers import CrashPolicy

BACKEND = "python"
INIT_TIMEOUT = "initialize-timeout-seconds"
RESTART_LIMIT = "restart-limit"
RESTART_WINDOW = "restart-window-seconds"


def lifecycle_options(backend_config: Iterable[tuple[str, str, str]]) -> dict[str, Any]:
    """``LoadOptions`` keyword arguments for the python backend's settings (entries for
    other backends are left to them); ValueError names a bad value."""
    values = {
        setting: value
        for backend, setting, value in backend_config
        if backend in (BACKEND, "") and setting in (INIT_TIMEOUT, RESTART_LIMIT, RESTART_WINDOW)
    }
    options: dict[str, Any] = {}
    if INIT_TIMEOUT in values:
        options["load_timeout_s"] = _positive(INIT_TIMEOUT, values[INIT_TIMEOUT])
    if RESTART_LIMIT in values or RESTART_WINDOW in values:
        default = CrashPolicy()
        limit = int(_positive(RESTART_LIMIT, values.get(RESTART_LIMIT, str(default.limit))))
        window = _positive(RESTART_WINDOW, values.get(RESTART_WINDOW, str(default.window_s)))
        options["crash_policy"] = CrashPolicy(limit, window)
    return options


def _positive(name: str, text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise ValueError(
            f"--backend-config={BACKEND},{name} must be a number, got {text!r}"
        ) from None
    if not value > 0:
        raise ValueError(f"--backend-config={BACKEND},{name} must be > 0, got {text!r}")
    return value
