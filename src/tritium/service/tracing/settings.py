"""Triton's trace extension: settings (global and per model) and which requests to trace.

Settings have Triton's names and string values (``trace_level`` a list): ``trace_rate``
(trace one request in N), ``trace_count`` (traces left, -1 for no limit),
``log_frequency`` (write a file every N traces; 0: at shutdown), ``trace_file`` and
``trace_mode`` (fixed at start-up). A model's own settings override the global ones key by
key; JSON null removes an override (or, globally, restores the start-up value).
Validation texts and status codes are Triton's.

``--trace-config`` is parsed here too (``parse_trace_config``), with Triton's keys; with
``mode=opentelemetry`` sampled requests are exported as spans (see otel.py) instead
of written to the trace file, under the same level, rate and count.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from tritium.core.errors import InternalError, InvalidArgument, Unsupported
from tritium.service.tracing.otel_options import OtelOptions, parse_otel_options, require_sdk

LEVELS = ("OFF", "TIMESTAMPS")
MODES = ("triton", "opentelemetry")
# Where ``parse_trace_config`` puts the OpenTelemetry options (mode=opentelemetry only);
# they are fixed at start-up and not part of the trace extension's settings.
OTEL_KEY = "opentelemetry"
_KEYS = ("trace_level", "trace_rate", "trace_count", "log_frequency")


def startup_settings(trace_file: str = "") -> dict[str, Any]:
    return {
        "trace_level": ["OFF"],
        "trace_rate": "1000",
        "trace_count": "-1",
        "log_frequency": "0",
        "trace_file": trace_file,
        "trace_mode": "triton",
    }


def parse_trace_config(entries: Iterable[str]) -> dict[str, Any]:
    """``--trace-config`` entries (``[<mode>,]<setting>=<value>``) → start-up settings."""
    settings = startup_settings()
    otel_entries: list[tuple[str, str]] = []
    for entry in entries:
        setting_part, eq, value = entry.partition("=")
        mode, comma, setting = setting_part.partition(",")
        if not comma:
            mode, setting = "", setting_part
        if not eq or not setting or not value:
            raise ValueError(
                "--trace-config option format is '<mode>,<setting>=<value>' or "
                f"'<setting>=<value>'. Got {entry}"
            )
        if mode == "opentelemetry":
            otel_entries.append((setting, value))
            continue
        if mode not in ("", "triton"):
            raise ValueError(f"--trace-config: unknown trace mode '{mode}'")
        if setting == "mode" and value not in MODES:
            raise ValueError(
                f"--trace-config: unknown trace mode '{value}' (known: {', '.join(MODES)})"
            )
        key = {
            "level": "trace_level",
            "rate": "trace_rate",
            "count": "trace_count",
            "file": "trace_file",
            "log-frequency": "log_frequency",
            "log_frequency": "log_frequency",
            "mode": "trace_mode",
        }.get(setting)
        if key is None:
            raise ValueError(f"--trace-config: unknown setting '{setting}'")
        if key == "trace_level":
            value = value.upper()
            levels = settings["trace_level"] if settings["trace_level"] != ["OFF"] else []
            settings["trace_level"] = ["OFF"] if value == "OFF" else [*levels, value]
        else:
            settings[key] = value
    try:
        # A zero rate is accepted here, as Triton does (only requests that bring their
        # own trace context are traced then); the trace setting API refuses one.
        checked = _validated(settings, settings)
    except (InvalidArgument, InternalError, Unsupported) as exc:
        raise ValueError(f"--trace-config: {exc.message}") from None
    # Triton accepts the settings of the mode it does not use, and ignores them.
    otel = parse_otel_options(otel_entries)
    if settings["trace_mode"] == "opentelemetry":
        require_sdk()
        settings[OTEL_KEY] = otel
    elif checked["trace_level"] != ["OFF"] and not settings["trace_file"]:
        raise ValueError(
            "--trace-config level=TIMESTAMPS needs a trace file: add "
            "--trace-config triton,file=<path>"
        )
    return settings


def _int_setting(key: str, value: str, low: int) -> int:
    try:
        number = int(value)
    except ValueError:
        raise InvalidArgument(f"Unable to parse '{key}', got: {value}") from None
    if number < low:
        raise InvalidArgument(f"Unable to parse '{key}'. Expecting value >= {low}, got:{value}")
    return number


def _validated(doc: dict[str, Any], current: dict[str, Any]) -> dict[str, Any]:
    """The updates ``doc`` asks for (None: clear), checked as Triton checks them."""
    out: dict[str, Any] = {}
    if "trace_file" in doc and doc is not current:
        raise Unsupported("trace file location can not be updated through network protocol")
    for key in _KEYS:
        if key not in doc:
            continue
        value = doc[key]
        if value is None:
            out[key] = None
            continue
        if key == "trace_level":
            if not isinstance(value, list):
                raise InternalError("attempt to access JSON non-array as array")
            if not all(isinstance(v, str) for v in value):
                raise InternalError("attempt to access JSON non-string as string")
            if "OFF" in value and len(value) > 1:
                raise InvalidArgument("Expect only one trace level 'OFF' is specified")
            if "TENSORS" in value:
                raise Unsupported("trace level TENSORS is not supported: use TIMESTAMPS")
            # Triton ignores levels it does not know.
            levels = [v for v in value if v in LEVELS]
            if levels:
                out[key] = levels
            continue
        if not isinstance(value, str):
            raise InternalError("attempt to access JSON non-string as string")
        _int_setting(key, value, -1 if key == "trace_count" else 0)
        out[key] = value
    return out


def _check_rate(merged: dict[str, Any]) -> None:
    # Triton accepts a zero rate while tracing is off and refuses it once it would apply.
    if merged["trace_level"] != ["OFF"] and int(merged["trace_rate"]) == 0:
        raise InvalidArgument(
            "Attempting to set invalid trace setting :sample rate must be non-zero"
        )


class Sampler:
    """Which requests of one model get a trace, under that model's settings."""

    __slots__ = ("rate", "remaining", "seen")

    def __init__(self, settings: dict[str, Any]) -> None:
        self.rate = int(settings["trace_rate"])
        self.remaining = int(settings["trace_count"])
        self.seen = 0

    def sample(self) -> bool:
        if self.remaining == 0 or not self.rate:
            return False
        self.seen += 1
        if self.seen % self.rate:
            return False
        if self.remaining > 0:
            self.remaining -= 1
        return True


class TraceSettings:
    def __init__(
        self,
        startup: dict[str, Any] | None = None,
        known_model: Callable[[str], bool] = lambda name: True,
    ) -> None:
        self._startup = dict(startup or startup_settings())
        #: OpenTelemetry export options (mode=opentelemetry), else None: the trace file.
        self.opentelemetry: OtelOptions | None = self._startup.pop(OTEL_KEY, None)
        self._global = dict(self._startup)
        self._models: dict[str, dict[str, Any]] = {}
        self._known = known_model
        # True while any model may be traced: the request path checks this one attribute.
        self.active = False
        self._samplers: dict[str, Sampler | None] = {}
        self._rebuild()

    @property
    def trace_file(self) -> str:
        return str(self._startup["trace_file"])

    @property
    def log_frequency(self) -> int:
        return int(self._global["log_frequency"])

    def get(self, model: str = "") -> dict[str, Any]:
        if model:
            self._check_model(model)
            return {**self._global, **self._models.get(model, {})}
        return dict(self._global)

    def update(self, model: str, doc: object) -> dict[str, Any]:
        if model:
            self._check_model(model)
        if not isinstance(doc, dict):
            return self.get(model)
        changes = _validated(doc, {})
        needs_file = self.opentelemetry is None and not self.trace_file
        if changes.get("trace_level", ["OFF"]) != ["OFF"] and needs_file:
            raise Unsupported(
                "tracing needs a trace file, set at start-up with --trace-config "
                "triton,file=<path>"
            )
        target = dict(self._models.get(model, {})) if model else dict(self._global)
        for key, value in changes.items():
            if value is not None:
                target[key] = value
            elif model:
                target.pop(key, None)
            else:
                target[key] = self._startup[key]
        if model:
            _check_rate({**self._global, **target})
            self._models[model] = target
        else:
            _check_rate(target)
            for own in self._models.values():
                _check_rate({**target, **own})
            self._global = target
        self._rebuild()
        return self.get(model)

    def _check_model(self, model: str) -> None:
        if not self._known(model):
            raise InvalidArgument(f"Request for unknown model : {model}")

    def _rebuild(self) -> None:
        """Forget the samplers (a changed setting restarts the counts)."""
        self._samplers = {}
        levels = [self._global["trace_level"]]
        levels += [own["trace_level"] for own in self._models.values() if "trace_level" in own]
        self.active = any(level != ["OFF"] for level in levels)

    def sampler_for(self, model: str) -> Sampler | None:
        """The sampler that decides for ``model`` (None: the model is not traced)."""
        try:
            return self._samplers[model]
        except KeyError:
            merged = {**self._global, **self._models.get(model, {})}
            sampler = Sampler(merged) if merged["trace_level"] != ["OFF"] else None
            self._samplers[model] = sampler
            return sampler
