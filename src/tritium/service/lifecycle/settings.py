"""Model life-cycle settings read from ``--backend-config=python,<setting>=<value>``.

``initialize-timeout-seconds``: how long importing model.py and each instance's
``initialize()`` may take before the version is UNAVAILABLE (default 600).
A crashed instance is restarted at once, then after 1, 2, 4 … seconds while it keeps
failing, never abandoned: ``restart-backoff-max-seconds`` caps the wait (default 30),
``restart-backoff-reset-seconds`` is how long an instance must run without failing for its
next crash to count as a first one again (default 60). A restart whose ``initialize()``
raises makes the version UNAVAILABLE with that error, as Triton does, unless
``restart-after-initialize-error=true``.
``restart-limit`` / ``restart-window-seconds``: asked for, an instance that exits (or fails
to restart) this many times within the window is not restarted again and its version is
UNAVAILABLE with the reason (default: no limit; window 60).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from tritium.workers import BackoffPolicy, CrashPolicy

BACKEND = "python"
INIT_TIMEOUT = "initialize-timeout-seconds"
RESTART_LIMIT = "restart-limit"
RESTART_WINDOW = "restart-window-seconds"
BACKOFF_MAX = "restart-backoff-max-seconds"
BACKOFF_RESET = "restart-backoff-reset-seconds"
AFTER_INIT_ERROR = "restart-after-initialize-error"
_SETTINGS = (INIT_TIMEOUT, RESTART_LIMIT, RESTART_WINDOW, BACKOFF_MAX, BACKOFF_RESET)


def lifecycle_options(backend_config: Iterable[tuple[str, str, str]]) -> dict[str, Any]:
    """``LoadOptions`` keyword arguments for the python backend's settings (entries for
    other backends are left to them); ValueError names a bad value."""
    values = {
        setting: value
        for backend, setting, value in backend_config
        if backend in (BACKEND, "") and setting in (*_SETTINGS, AFTER_INIT_ERROR)
    }
    options: dict[str, Any] = {}
    if INIT_TIMEOUT in values:
        options["load_timeout_s"] = _positive(INIT_TIMEOUT, values[INIT_TIMEOUT])
    if RESTART_LIMIT in values or RESTART_WINDOW in values:
        default = CrashPolicy()
        limit = int(_positive(RESTART_LIMIT, values.get(RESTART_LIMIT, str(default.limit))))
        window = _positive(RESTART_WINDOW, values.get(RESTART_WINDOW, str(default.window_s)))
        options["crash_policy"] = CrashPolicy(limit, window)
    if BACKOFF_MAX in values or BACKOFF_RESET in values:
        default_backoff = BackoffPolicy()
        cap = _positive(BACKOFF_MAX, values.get(BACKOFF_MAX, str(default_backoff.max_s)))
        reset = _positive(
            BACKOFF_RESET, values.get(BACKOFF_RESET, str(default_backoff.reset_after_s))
        )
        first = min(default_backoff.first_s, cap)
        options["restart_backoff"] = BackoffPolicy(first, cap, reset)
    if AFTER_INIT_ERROR in values:
        options["restart_after_init_error"] = _boolean(AFTER_INIT_ERROR, values[AFTER_INIT_ERROR])
    return options


def _boolean(name: str, text: str) -> bool:
    value = text.strip().lower()
    if value in ("true", "1", "yes", "on"):
        return True
    if value in ("false", "0", "no", "off"):
        return False
    raise ValueError(f"--backend-config={BACKEND},{name} must be true or false, got {text!r}")


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
