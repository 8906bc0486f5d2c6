"""Settings: Triton's defaults, normalisation and validation (no CLI involved)."""

from __future__ import annotations

import dataclasses

import pytest

from tritium.server.settings import Settings

REPO = ("/models",)


def make(**overrides: object) -> Settings:
    overrides.setdefault("model_repository", REPO)
    return Settings(**overrides)  # type: ignore[arg-type]


# tritonserver 2.51's defaults (command_line_parser.h and `tritonserver --help`).
TRITON_DEFAULTS = {
    "id": "triton",
    "exit_timeout_secs": 30,
    "log_verbose": 0,
    "log_info": True,
    "log_warning": True,
    "log_error": True,
    "log_format": "default",
    "log_file": "",
    "exit_on_error": True,
    "disable_auto_complete_config": False,
    "strict_readiness": True,
    "model_control_mode": "none",
    "repository_poll_secs": 15,
    "load_model": (),
    "model_config_name": "",
    "model_load_thread_count": 4,
    "model_load_retry_count": 0,
    "allow_http": True,
    "http_address": "0.0.0.0",
    "http_port": 8000,
    "reuse_http_port": False,
    "http_max_input_size": 64 * 1024 * 1024,
    # Triton's OpenAI frontend is a program of its own (port 9000); off unless asked for.
    "openai_port": -1,
    "allow_grpc": True,
    "grpc_implementation": "native",  # not a Triton flag: which transport serves gRPC
    "allow_client_shm": True,  # not a Triton flag: Triton always allows registration
    "grpc_address": "0.0.0.0",
    "grpc_port": 8001,
    "reuse_grpc_port": False,
    "grpc_use_ssl": False,
    "grpc_use_ssl_mutual": False,
    "grpc_server_cert": "",
    "grpc_server_key": "",
    "grpc_root_cert": "",
    "grpc_infer_response_compression_level": "none",
    "grpc_keepalive_time": 7_200_000,
    "grpc_keepalive_timeout": 20_000,
    "grpc_keepalive_permit_without_calls": False,
    "grpc_http2_max_pings_without_data": 2,
    "grpc_http2_min_recv_ping_interval_without_data": 300_000,
    "grpc_http2_max_ping_strikes": 2,
    "grpc_max_connection_age": None,
    "grpc_max_connection_age_grace": None,
    "allow_metrics": True,
    "allow_cpu_metrics": True,
    "allow_gpu_metrics": True,
    "metrics_address": "0.0.0.0",  # Triton: same as --http-address
    "metrics_port": 8002,
    "metrics_interval_ms": 2000,
    "metrics_config": (),
    "trace_config": (),
    "cache_config": (),
    "cache_directory": "",
    "response_cache_byte_size": None,
    "rate_limit": "off",
    "rate_limit_resource": (),
    "backend_config": (),
    # Not Triton flags (Triton has no connection timeouts): tritium's limits.
    "http_keep_alive_timeout_secs": 75,
    "http_header_timeout_secs": 30,
    "http_body_timeout_secs": 60,
    "grpc_idle_timeout_secs": 300,
    "http_restricted_api": (),
    "grpc_restricted_protocol": (),
    "client_shm_max_regions": 4096,
    "client_shm_max_bytes": 64 * 2**30,
    "client_shm_key_prefix": "",
    # Not a Triton flag: polling while a lone request is served.
    "busy_poll_us": 1000,
    "busy_poll_linger_us": 150,
    "busy_poll_worker_us": 300,
    "busy_poll_worker_spare_us": 1000,
    # Not a Triton flag: the pre-drain window (0: stop accepting at SIGTERM, as Triton).
    "drain_delay_secs": 0,
}


def test_defaults_are_tritons() -> None:
    settings = make()
    actual = {f.name: getattr(settings, f.name) for f in dataclasses.fields(Settings)}
    assert actual == {"model_repository": REPO, **TRITON_DEFAULTS}


def test_every_field_documents_itself_for_the_cli() -> None:
    for f in dataclasses.fields(Settings):
        assert f.metadata.get("help"), f"{f.name} has no help text"
        assert f.metadata.get("group"), f"{f.name} has no help section"


def test_settings_are_frozen_and_hashable() -> None:
    settings = make()
    with pytest.raises(dataclasses.FrozenInstanceError):
        settings.http_port = 1  # type: ignore[misc]
    assert hash(settings) == hash(make())


def test_model_repository_is_required() -> None:
    with pytest.raises(ValueError, match="--model-repository must be specified"):
        Settings()
    with pytest.raises(ValueError, match="--model-repository must not be empty"):
        make(model_repository=("",))


def test_sequences_are_normalised_to_deduplicated_tuples() -> None:
    settings = make(
        model_repository=["/b", "/a", "/b"],
        model_control_mode="explicit",
        load_model=["m1", "m1", "m2"],
        backend_config=[["python", "k", "v"]],
    )
    assert settings.model_repository == ("/b", "/a")
    assert settings.load_model == ("m1", "m2")
    assert settings.backend_config == (("python", "k", "v"),)
    assert make(model_repository="/one").model_repository == ("/one",)


@pytest.mark.parametrize("field", ["http_port", "grpc_port", "metrics_port"])
@pytest.mark.parametrize("port", [-1, 65536])
def test_ports_out_of_range_are_rejected(field: str, port: int) -> None:
    flag = "--" + field.replace("_", "-")
    with pytest.raises(ValueError, match=f"{flag} must be between 0 and 65535, got {port}"):
        make(**{field: port})


def test_port_bounds_are_accepted() -> None:
    settings = make(http_port=0, grpc_port=65535, metrics_port=1)
    assert (settings.http_port, settings.grpc_port, settings.metrics_port) == (0, 65535, 1)


def test_two_services_on_one_address_and_port_collide_like_triton() -> None:
    with pytest.raises(
        ValueError,
        match="cannot listen to HTTP requests and GRPC requests at the same address and "
        "port 0.0.0.0:8000",
    ):
        make(grpc_port=8000)
    with pytest.raises(ValueError, match="GRPC requests and metrics requests"):
        make(grpc_port=8002)


def test_port_sharing_is_fine_when_disabled_on_other_address_or_ephemeral() -> None:
    make(grpc_port=8000, allow_grpc=False)
    make(grpc_port=8000, grpc_address="127.0.0.1")
    make(http_port=0, grpc_port=0, metrics_port=0)


def test_the_openai_port_is_off_unless_given_and_checked_like_the_others() -> None:
    assert make().openai_port == -1
    assert make(openai_port=0).openai_port == 0
    with pytest.raises(ValueError, match="--openai-port must be between -1 and 65535"):
        make(openai_port=65536)
    with pytest.raises(ValueError, match="HTTP requests and OpenAI requests"):
        make(openai_port=8000)
    make(openai_port=8000, http_port=8080)


def test_metrics_address_follows_http_address_unless_set() -> None:
    assert make(http_address="127.0.0.1").metrics_address == "127.0.0.1"
    assert make(http_address="127.0.0.1", metrics_address="::1").metrics_address == "::1"


@pytest.mark.parametrize(
    "field",
    [
        "exit_timeout_secs",
        "drain_delay_secs",
        "log_verbose",
        "repository_poll_secs",
        "grpc_keepalive_time",
        "grpc_http2_max_ping_strikes",
        "grpc_max_connection_age",
    ],
)
def test_negative_durations_and_counts_are_rejected(field: str) -> None:
    with pytest.raises(ValueError, match=f"--{field.replace('_', '-')} must be >= 0, got -1"):
        make(**{field: -1})


def test_sizes_and_thread_counts_must_be_positive() -> None:
    with pytest.raises(ValueError, match="--http-max-input-size must be > 0"):
        make(http_max_input_size=0)
    with pytest.raises(ValueError, match="--model-load-thread-count must be > 0"):
        make(model_load_thread_count=0)


def test_model_control_mode_is_case_insensitive_and_checked() -> None:
    assert make(model_control_mode="EXPLICIT").model_control_mode == "explicit"
    with pytest.raises(ValueError, match="invalid argument for --model-control-mode"):
        make(model_control_mode="sometimes")


def test_log_format_and_compression_level_are_checked() -> None:
    with pytest.raises(ValueError, match="--log-format"):
        make(log_format="json")
    assert (
        make(grpc_infer_response_compression_level="HIGH").grpc_infer_response_compression_level
        == "high"
    )
    with pytest.raises(ValueError, match="--grpc-infer-response-compression-level"):
        make(grpc_infer_response_compression_level="max")


def test_load_model_needs_explicit_mode_like_triton() -> None:
    with pytest.raises(ValueError, match="requires setting '--model-control-mode=explicit'"):
        make(load_model=("m",))
    assert make(model_control_mode="explicit", load_model=("*",)).load_model == ("*",)


def test_wildcard_must_be_the_only_startup_model() -> None:
    with pytest.raises(ValueError, match="Wildcard model name '\\*' must be the ONLY"):
        make(model_control_mode="explicit", load_model=("*", "m"))


def test_model_config_name_rejects_spaces() -> None:
    with pytest.raises(ValueError, match="--model-config-name must not contain spaces"):
        make(model_config_name="h 100")
    assert make(model_config_name="h100").model_config_name == "h100"


@pytest.mark.parametrize("entry", [("python", "", "v"), ("python", "k", ""), ("python", "k")])
def test_malformed_backend_config_entries_are_rejected(entry: tuple[str, ...]) -> None:
    with pytest.raises(ValueError, match="--backend-config"):
        make(backend_config=(entry,))


def test_mutual_tls_implies_tls_and_needs_certificates() -> None:
    with pytest.raises(ValueError, match="--grpc-use-ssl requires --grpc-server-cert"):
        make(grpc_use_ssl=True)
    with pytest.raises(ValueError, match="--grpc-use-ssl-mutual requires --grpc-root-cert"):
        make(grpc_use_ssl_mutual=True, grpc_server_cert="c.pem", grpc_server_key="k.pem")
    settings = make(
        grpc_use_ssl_mutual=True,
        grpc_server_cert="c.pem",
        grpc_server_key="k.pem",
        grpc_root_cert="ca.pem",
    )
    assert settings.grpc_use_ssl is True
    # TLS files are irrelevant when gRPC is off.
    make(allow_grpc=False, grpc_use_ssl=True)


def test_auto_complete_config_is_the_negation_of_the_switch() -> None:
    assert make().auto_complete_config is True
    assert make(disable_auto_complete_config=True).auto_complete_config is False
