"""What ``Settings`` does with the values it is given: coerce them, then check them.

Both work on the field values by name (``Settings`` passes ``vars(self)``), so this module
needs nothing of the dataclass itself. A check that fails raises ``ValueError`` with a
message naming the flag, in Triton's words where Triton has words for it; the option
parsers of other layers (metrics, tracing, life cycle, restricted APIs) are run here too so
that a bad value fails at start-up, not when first used.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tritium.frontends.metrics.config import parse_metrics_config
from tritium.frontends.restricted import GRPC_HEADER_PREFIX, RestrictedApis
from tritium.scheduling.rate_limit_resources import explicit_resources
from tritium.service.cache.config import parse_cache_config
from tritium.service.lifecycle.settings import lifecycle_options
from tritium.service.tracing.settings import parse_trace_config

MODEL_CONTROL_MODES = ("none", "poll", "explicit")
LOG_FORMATS = ("default", "ISO8601")
GRPC_COMPRESSION_LEVELS = ("none", "low", "medium", "high")
GRPC_IMPLEMENTATIONS = ("native", "grpcio")
RATE_LIMIT_MODES = ("off", "execution_count")

_NON_NEGATIVE = (
    "exit_timeout_secs",
    "drain_delay_secs",
    "busy_poll_us",
    "busy_poll_linger_us",
    "busy_poll_worker_us",
    "busy_poll_worker_spare_us",
    "log_verbose",
    "repository_poll_secs",
    "model_load_retry_count",
    "metrics_interval_ms",
    "grpc_keepalive_time",
    "grpc_keepalive_timeout",
    "grpc_http2_max_pings_without_data",
    "grpc_http2_min_recv_ping_interval_without_data",
    "grpc_http2_max_ping_strikes",
    "grpc_max_connection_age",
    "grpc_max_connection_age_grace",
)
_TIMEOUTS = (
    "http_keep_alive_timeout_secs",
    "http_header_timeout_secs",
    "http_body_timeout_secs",
    "grpc_idle_timeout_secs",
)


def http_restrictions(spec: tuple[str, ...]) -> RestrictedApis:
    """``--http-restricted-api`` values, parsed."""
    return RestrictedApis.parse(spec, "--http-restricted-api")


def grpc_restrictions(spec: tuple[str, ...]) -> RestrictedApis:
    """``--grpc-restricted-protocol`` values, parsed."""
    return RestrictedApis.parse(spec, "--grpc-restricted-protocol", GRPC_HEADER_PREFIX)


def normalized(s: Mapping[str, Any]) -> dict[str, Any]:
    """The fields whose given value is coerced (lists, a lone string) or derived, with
    their new values."""
    new: dict[str, Any] = {}
    for name in ("model_repository", "load_model"):
        value = s[name]
        items = (value,) if isinstance(value, str) else tuple(value)
        # Triton keeps these in sets: repeating a path or a model name is harmless.
        new[name] = tuple(dict.fromkeys(items))
    new["backend_config"] = tuple(tuple(entry) for entry in s["backend_config"])
    for name in (
        "metrics_config",
        "trace_config",
        "cache_config",
        "rate_limit_resource",
        "http_restricted_api",
        "grpc_restricted_protocol",
    ):
        value = s[name]
        new[name] = (value,) if isinstance(value, str) else tuple(value)
    for name in (
        "model_control_mode",
        "grpc_implementation",
        "grpc_infer_response_compression_level",
        "rate_limit",
    ):
        new[name] = s[name].lower()
    if not s["metrics_address"]:
        # Triton binds metrics next to HTTP unless told otherwise.
        new["metrics_address"] = s["http_address"]
    if s["grpc_use_ssl_mutual"]:
        new["grpc_use_ssl"] = True
    return new


def check(s: Mapping[str, Any]) -> None:
    """Raise ``ValueError`` for the first invalid value or combination (normalised values)."""
    _check_repository(s)
    for name in ("http_port", "grpc_port", "metrics_port"):
        port = s[name]
        if not 0 <= port <= 65535:
            raise ValueError(f"--{_flag(name)} must be between 0 and 65535, got {port}")
    if not -1 <= s["openai_port"] <= 65535:
        raise ValueError(f"--openai-port must be between -1 and 65535, got {s['openai_port']}")
    _check_port_collision(s)
    for name in _NON_NEGATIVE:
        value = s[name]
        if value is not None and value < 0:
            raise ValueError(f"--{_flag(name)} must be >= 0, got {value}")
    for name in ("model_load_thread_count", "http_max_input_size"):
        if s[name] <= 0:
            raise ValueError(f"--{_flag(name)} must be > 0, got {s[name]}")
    _check_choice(s, "model_control_mode", MODEL_CONTROL_MODES)
    _check_choice(s, "log_format", LOG_FORMATS)
    parse_metrics_config(s["metrics_config"])  # raises ValueError naming the bad setting
    parse_trace_config(s["trace_config"])
    parse_cache_config(s["cache_config"], s["response_cache_byte_size"])
    _check_choice(s, "rate_limit", RATE_LIMIT_MODES)
    explicit_resources(s["rate_limit_resource"])
    _check_choice(s, "grpc_infer_response_compression_level", GRPC_COMPRESSION_LEVELS)
    _check_choice(s, "grpc_implementation", GRPC_IMPLEMENTATIONS)
    _check_models(s)
    _check_backend_config(s["backend_config"])
    if s["allow_grpc"] and s["grpc_use_ssl"]:
        if not (s["grpc_server_cert"] and s["grpc_server_key"]):
            raise ValueError("--grpc-use-ssl requires --grpc-server-cert and --grpc-server-key")
        if s["grpc_use_ssl_mutual"] and not s["grpc_root_cert"]:
            raise ValueError("--grpc-use-ssl-mutual requires --grpc-root-cert")
    _check_limits(s)


def _check_repository(s: Mapping[str, Any]) -> None:
    if not s["model_repository"]:
        raise ValueError("--model-repository must be specified")
    if any(not path for path in s["model_repository"]):
        raise ValueError("--model-repository must not be empty")


def _check_models(s: Mapping[str, Any]) -> None:
    if s["load_model"] and s["model_control_mode"] != "explicit":
        # Triton's wording: the flag would otherwise be silently ignored.
        raise ValueError(
            "Use of '--load-model' requires setting '--model-control-mode=explicit' as well."
        )
    if "*" in s["load_model"] and len(s["load_model"]) > 1:
        raise ValueError(
            "Wildcard model name '*' must be the ONLY startup model if specified at all."
        )
    if any(ch.isspace() for ch in s["model_config_name"]):
        raise ValueError(
            f"--model-config-name must not contain spaces, got {s['model_config_name']!r}"
        )


def _check_backend_config(entries: tuple[tuple[str, str, str], ...]) -> None:
    for entry in entries:
        if len(entry) != 3 or not all(isinstance(part, str) for part in entry):
            raise ValueError(
                f"--backend-config entries are (backend, setting, value), got {entry!r}"
            )
        if not entry[1] or not entry[2]:
            raise ValueError(
                "--backend-config option format is '<backend name>,<setting>=<value>'. "
                f"Got {entry!r}"
            )
    # Model life-cycle settings (--backend-config=python,...) fail like a bad flag.
    lifecycle_options(entries)


def _check_limits(s: Mapping[str, Any]) -> None:
    for name in _TIMEOUTS:
        if s[name] < 0:
            raise ValueError(f"--{_flag(name)} must be >= 0, got {s[name]}")
    for name in ("client_shm_max_regions", "client_shm_max_bytes"):
        if s[name] <= 0:
            raise ValueError(f"--{_flag(name)} must be > 0, got {s[name]}")
    prefix = s["client_shm_key_prefix"]
    if "/" in prefix.lstrip("/") or "\x00" in prefix:
        raise ValueError("--client-shm-key-prefix must not contain '/' (after a leading one)")
    # Parsed once here so a malformed spec fails start-up (messages never echo values).
    http_restrictions(s["http_restricted_api"])
    grpc_restrictions(s["grpc_restricted_protocol"])


def _check_choice(s: Mapping[str, Any], name: str, choices: tuple[str, ...]) -> None:
    value = s[name]
    if value not in choices:
        allowed = ", ".join(repr(c) for c in choices)
        raise ValueError(f"invalid argument for --{_flag(name)}: {value!r} (choose from {allowed})")


def _check_port_collision(s: Mapping[str, Any]) -> None:
    """Refuse two enabled services on one address and port, as Triton does.

    Port 0 asks the OS for a free port, so several services may all ask for it.
    """
    services = [
        ("HTTP", s["allow_http"], s["http_address"], s["http_port"]),
        ("GRPC", s["allow_grpc"], s["grpc_address"], s["grpc_port"]),
        ("metrics", s["allow_metrics"], s["metrics_address"], s["metrics_port"]),
        ("OpenAI", s["openai_port"] > 0, s["http_address"], s["openai_port"]),
    ]
    enabled = [(name, addr, port) for name, on, addr, port in services if on and port != 0]
    for i, (name, addr, port) in enumerate(enabled):
        for other, other_addr, other_port in enabled[i + 1 :]:
            if (addr, port) == (other_addr, other_port):
                raise ValueError(
                    f"The server cannot listen to {name} requests and {other} requests "
                    f"at the same address and port {addr}:{port}"
                )


def _flag(name: str) -> str:
    return name.replace("_", "-")
