"""``--trace-config opentelemetry,<setting>=<value>``: Triton's OpenTelemetry trace options.

Settings (Triton's names and defaults): ``url`` (the OTLP/HTTP receiver,
``http://localhost:4318/v1/traces``), ``resource`` (``<key>=<value>``, repeatable;
``service.name=triton-inference-server`` unless given), and the batch span processor's
``bsp_max_queue_size`` (2048), ``bsp_schedule_delay`` (ms, 5000) and
``bsp_max_export_batch_size`` (512, at most the queue size). Parsing imports nothing from
OpenTelemetry; ``require_sdk`` says which package to install when it is missing.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Iterable
from dataclasses import dataclass, field

DEFAULT_URL = "http://localhost:4318/v1/traces"
DEFAULT_SERVICE_NAME = "triton-inference-server"
# Only the batch span processor's settings that Triton names; the environment variables
# OTEL_BSP_* apply when a setting is not given, as the SDK reads them.
_BSP = {
    "bsp_max_queue_size": "OTEL_BSP_MAX_QUEUE_SIZE",
    "bsp_schedule_delay": "OTEL_BSP_SCHEDULE_DELAY",
    "bsp_max_export_batch_size": "OTEL_BSP_MAX_EXPORT_BATCH_SIZE",
}
_BSP_DEFAULTS = {
    "bsp_max_queue_size": 2048,
    "bsp_schedule_delay": 5000,
    "bsp_max_export_batch_size": 512,
}
PACKAGES = "opentelemetry-sdk and opentelemetry-exporter-otlp-proto-http"
INSTALL_HINT = f"pip install 'tritium[opentelemetry]' (installs {PACKAGES})"


@dataclass(frozen=True)
class OtelOptions:
    url: str = DEFAULT_URL
    resource: tuple[tuple[str, str], ...] = ()
    bsp: dict[str, int] = field(default_factory=dict)  # only the settings given

    def bsp_setting(self, name: str) -> int:
        """The value in force: given on the command line, else the environment, else
        Triton's default."""
        if name in self.bsp:
            return self.bsp[name]
        env = os.environ.get(_BSP[name], "")
        return int(env) if env.isdigit() and int(env) > 0 else _BSP_DEFAULTS[name]


def parse_otel_options(entries: Iterable[tuple[str, str]]) -> OtelOptions:
    """``(setting, value)`` pairs given as ``opentelemetry,<setting>=<value>``."""
    url = DEFAULT_URL
    resource: list[tuple[str, str]] = []
    bsp: dict[str, int] = {}
    for setting, value in entries:
        if setting == "url":
            url = value if "://" in value else f"http://{value}"
        elif setting == "resource":
            key, eq, attr = value.partition("=")
            if not eq or not key:
                raise ValueError(
                    "--trace-config opentelemetry,resource must be "
                    f"'resource=<key>=<value>', got 'resource={value}'"
                )
            resource.append((key, attr))
        elif setting in _BSP:
            try:
                number = int(value)
            except ValueError:
                number = 0
            if number <= 0:
                raise ValueError(
                    f"--trace-config opentelemetry,{setting} must be a positive integer, "
                    f"got '{value}'"
                )
            bsp[setting] = number
        else:
            known = ", ".join(["url", "resource", *_BSP])
            raise ValueError(
                f"--trace-config: unknown opentelemetry setting '{setting}' (known: {known})"
            )
    options = OtelOptions(url, tuple(resource), bsp)
    if options.bsp_setting("bsp_max_export_batch_size") > options.bsp_setting(
        "bsp_max_queue_size"
    ):
        raise ValueError(
            "--trace-config opentelemetry,bsp_max_export_batch_size must be less than or "
            "equal to bsp_max_queue_size"
        )
    return options


def require_sdk() -> None:
    """Raise ValueError naming the package to install when the OpenTelemetry SDK or its
    OTLP/HTTP exporter cannot be imported."""
    for module in ("opentelemetry.sdk.trace", "opentelemetry.exporter.otlp.proto.http"):
        try:
            importlib.import_module(module)
        except ImportError:
            raise ValueError(
                "--trace-config mode=opentelemetry needs the OpenTelemetry SDK and its "
                f"OTLP/HTTP exporter, which are not installed: {INSTALL_HINT}"
            ) from None
