"""`tritium serve` command line: tritonserver's flags, value forms and error behaviour."""

from __future__ import annotations

import dataclasses
import importlib

import pytest

import tritium
from tritium.cli import parse_settings
from tritium.cli.triton_compat import IGNORED_FLAGS, UNSUPPORTED_FLAGS
from tritium.server.settings import Settings

# The module, not the `main` function that `tritium.cli` re-exports under the same name.
cli_main = importlib.import_module("tritium.cli.main")

REPO = "--model-repository=/models"


def parse(*argv: str) -> Settings:
    return parse_settings([REPO, *argv])


def usage_error(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    """Run `tritium serve ARGV`, expect argparse's usage error; return stderr."""
    with pytest.raises(SystemExit) as exc:
        parse_settings(list(argv))
    assert exc.value.code == 2
    return capsys.readouterr().err


# One non-default value for every settings field, in the form users type it.
EVERY_FLAG = [
    ("--id=my-server", "id", "my-server"),
    ("--exit-timeout-secs=5", "exit_timeout_secs", 5),
    ("--drain-delay-secs=15", "drain_delay_secs", 15),
    ("--log-verbose=2", "log_verbose", 2),
    ("--log-info=false", "log_info", False),
    ("--log-warning=false", "log_warning", False),
    ("--log-error=false", "log_error", False),
    ("--log-format=ISO8601", "log_format", "ISO8601"),
    ("--log-file=/tmp/t.log", "log_file", "/tmp/t.log"),
    ("--model-repository=/other", "model_repository", ("/models", "/other")),
    ("--exit-on-error=false", "exit_on_error", False),
    ("--disable-auto-complete-config", "disable_auto_complete_config", True),
    ("--strict-readiness=false", "strict_readiness", False),
    ("--model-control-mode=poll", "model_control_mode", "poll"),
    ("--repository-poll-secs=3", "repository_poll_secs", 3),
    ("--model-config-name=h100", "model_config_name", "h100"),
    ("--model-load-thread-count=8", "model_load_thread_count", 8),
    ("--model-load-retry-count=2", "model_load_retry_count", 2),
    ("--allow-http=false", "allow_http", False),
    ("--http-address=127.0.0.1", "http_address", "127.0.0.1"),
    ("--http-port=18000", "http_port", 18000),
    ("--reuse-http-port=true", "reuse_http_port", True),
    ("--http-max-input-size=8589934592", "http_max_input_size", 8 * 2**30),
    ("--allow-grpc=false", "allow_grpc", False),
    ("--grpc-address=127.0.0.1", "grpc_address", "127.0.0.1"),
    ("--grpc-port=18001", "grpc_port", 18001),
    ("--reuse-grpc-port=true", "reuse_grpc_port", True),
    ("--grpc-implementation=GRPCIO", "grpc_implementation", "grpcio"),
    ("--grpc-server-cert=c.pem", "grpc_server_cert", "c.pem"),
    ("--grpc-server-key=k.pem", "grpc_server_key", "k.pem"),
    ("--grpc-root-cert=ca.pem", "grpc_root_cert", "ca.pem"),
    (
        "--grpc-infer-response-compression-level=high",
        "grpc_infer_response_compression_level",
        "high",
    ),
    ("--grpc-keepalive-time=1000", "grpc_keepalive_time", 1000),
    ("--grpc-keepalive-timeout=500", "grpc_keepalive_timeout", 500),
    ("--grpc-keepalive-permit-without-calls=1", "grpc_keepalive_permit_without_calls", True),
    ("--grpc-http2-max-pings-without-data=0", "grpc_http2_max_pings_without_data", 0),
    (
        "--grpc-http2-min-recv-ping-interval-without-data=10000",
        "grpc_http2_min_recv_ping_interval_without_data",
        10000,
    ),
    ("--grpc-http2-max-ping-strikes=0", "grpc_http2_max_ping_strikes", 0),
    ("--grpc-max-connection-age=60000", "grpc_max_connection_age", 60000),
    ("--grpc-max-connection-age-grace=5000", "grpc_max_connection_age_grace", 5000),
    ("--allow-client-shm=false", "allow_client_shm", False),
    ("--allow-metrics=false", "allow_metrics", False),
    ("--allow-cpu-metrics=false", "allow_cpu_metrics", False),
    ("--allow-gpu-metrics=false", "allow_gpu_metrics", False),
    ("--metrics-address=127.0.0.2", "metrics_address", "127.0.0.2"),
    ("--metrics-port=18002", "metrics_port", 18002),
    ("--openai-port=9000", "openai_port", 9000),
    ("--metrics-interval-ms=500", "metrics_interval_ms", 500),
    ("--metrics-config=summary_latencies=true", "metrics_config", ("summary_latencies=true",)),
    ("--trace-config=rate=10", "trace_config", ("rate=10",)),
    ("--cache-config=local,size=1024", "cache_config", ("local,size=1024",)),
    ("--cache-directory=/opt/caches", "cache_directory", "/opt/caches"),
    ("--response-cache-byte-size=4096", "response_cache_byte_size", 4096),
    ("--rate-limit=execution_count", "rate_limit", "execution_count"),
    ("--rate-limit-resource=R1:4:0", "rate_limit_resource", ("R1:4:0",)),
    (
        "--backend-config=python,shm-default-byte-size=1048576",
        "backend_config",
        (("python", "shm-default-byte-size", "1048576"),),
    ),
    ("--http-keep-alive-timeout-secs=5", "http_keep_alive_timeout_secs", 5),
    ("--http-header-timeout-secs=0", "http_header_timeout_secs", 0),
    ("--http-body-timeout-secs=7", "http_body_timeout_secs", 7),
    ("--grpc-idle-timeout-secs=0", "grpc_idle_timeout_secs", 0),
    ("--http-restricted-api=inference:k=v", "http_restricted_api", ("inference:k=v",)),
    ("--grpc-restricted-protocol=health:k=v", "grpc_restricted_protocol", ("health:k=v",)),
    ("--client-shm-max-regions=10", "client_shm_max_regions", 10),
    ("--client-shm-max-bytes=8589934592", "client_shm_max_bytes", 8 * 2**30),
    ("--client-shm-key-prefix=mine_", "client_shm_key_prefix", "mine_"),
    ("--busy-poll-us=0", "busy_poll_us", 0),
    ("--busy-poll-linger-us=50", "busy_poll_linger_us", 50),
    ("--busy-poll-worker-us=0", "busy_poll_worker_us", 0),
    ("--busy-poll-worker-spare-us=0", "busy_poll_worker_spare_us", 0),
]
# Fields whose valid non-default value depends on another flag.
EVERY_FLAG_WITH_CONTEXT = [
    (["--model-control-mode=explicit", "--load-model=m"], "load_model", ("m",)),
    (
        ["--grpc-use-ssl=true", "--grpc-server-cert=c", "--grpc-server-key=k"],
        "grpc_use_ssl",
        True,
    ),
    (
        [
            "--grpc-use-ssl-mutual=on",
            "--grpc-server-cert=c",
            "--grpc-server-key=k",
            "--grpc-root-cert=r",
        ],
        "grpc_use_ssl_mutual",
        True,
    ),
]


def test_the_flag_tables_cover_every_settings_field() -> None:
    covered = {name for _, name, _ in EVERY_FLAG} | {n for _, n, _ in EVERY_FLAG_WITH_CONTEXT}
    assert covered == {f.name for f in dataclasses.fields(Settings)}


@pytest.mark.parametrize(("arg", "name", "expected"), EVERY_FLAG)
def test_every_flag_sets_its_field(arg: str, name: str, expected: object) -> None:
    settings = parse(arg)
    assert getattr(settings, name) == expected
    baseline = dataclasses.asdict(parse())
    changed = {k for k, v in dataclasses.asdict(settings).items() if baseline[k] != v}
    # ...and nothing else (metrics bind next to HTTP unless told otherwise).
    assert changed == ({name, "metrics_address"} if name == "http_address" else {name})


@pytest.mark.parametrize(("argv", "name", "expected"), EVERY_FLAG_WITH_CONTEXT)
def test_flags_that_need_a_companion(argv: list[str], name: str, expected: object) -> None:
    assert getattr(parse(*argv), name) == expected


def test_defaults_equal_settings_defaults() -> None:
    assert parse() == Settings(model_repository=("/models",))


def test_space_separated_values_work_like_getopt() -> None:
    settings = parse_settings(
        ["--model-repository", "/m", "--http-port", "9000", "--allow-grpc", "off"]
    )
    assert (settings.model_repository, settings.http_port, settings.allow_grpc) == (
        ("/m",),
        9000,
        False,
    )


def test_unambiguous_prefixes_are_accepted_like_getopt_long() -> None:
    assert parse_settings(["--model-repo=/m"]).model_repository == ("/m",)


def test_repeatable_flags_accumulate_in_order() -> None:
    settings = parse_settings(
        [
            "--model-repository=/a",
            "--model-store=/b",
            "--model-repository=/c",
            "--model-control-mode=explicit",
            "--load-model=x",
            "--load-model=y",
            "--backend-config=python,a=1",
            "--backend-config=b=2",
        ]
    )
    assert settings.model_repository == ("/a", "/b", "/c")
    assert settings.load_model == ("x", "y")
    assert settings.backend_config == (("python", "a", "1"), ("", "b", "2"))


@pytest.mark.parametrize("text", ["true", "True", "TRUE", "on", "On", "1"])
def test_true_spellings(text: str) -> None:
    assert parse("--allow-http=false", f"--strict-readiness={text}").strict_readiness is True
    assert parse(f"--reuse-http-port={text}").reuse_http_port is True


@pytest.mark.parametrize("text", ["false", "False", "FALSE", "off", "OFF", "0"])
def test_false_spellings(text: str) -> None:
    assert parse(f"--exit-on-error={text}").exit_on_error is False


def test_bare_boolean_flag_means_true() -> None:
    assert parse("--reuse-grpc-port").reuse_grpc_port is True
    assert parse("--grpc-keepalive-permit-without-calls", "--http-port=9").http_port == 9


@pytest.mark.parametrize("text", ["yes", "no", "t", "2", "", "truee"])
def test_other_boolean_spellings_are_rejected_like_triton(
    capsys: pytest.CaptureFixture[str], text: str
) -> None:
    err = usage_error(capsys, REPO, f"--allow-http={text}")
    assert f"argument --allow-http: invalid value for bool option: {text}" in err


def test_log_verbose_takes_integers_and_booleans() -> None:
    assert parse("--log-verbose=true").log_verbose == 1
    assert parse("--log-verbose=False").log_verbose == 0
    assert parse("--log-verbose=3").log_verbose == 3


@pytest.mark.parametrize("text", ["abc", "1.5", "1_000", "0x10", " 1", ""])
def test_malformed_integers_are_rejected(capsys: pytest.CaptureFixture[str], text: str) -> None:
    err = usage_error(capsys, REPO, f"--http-port={text}")
    assert f"argument --http-port: Invalid option value. Got {text}" in err


def test_integers_outside_int32_are_out_of_bound_like_triton(
    capsys: pytest.CaptureFixture[str],
) -> None:
    err = usage_error(capsys, REPO, "--exit-timeout-secs=2147483648")
    assert "Provided option value is out of bound. Got 2147483648" in err
    assert parse("--exit-timeout-secs=2147483647").exit_timeout_secs == 2**31 - 1


def test_invalid_settings_are_reported_as_usage_errors(capsys: pytest.CaptureFixture[str]) -> None:
    err = usage_error(capsys, REPO, "--http-port=70000")
    assert "tritium serve: error: --http-port must be between 0 and 65535, got 70000" in err
    err = usage_error(capsys, "--http-port=1")
    assert "--model-repository must be specified" in err
    err = usage_error(capsys, REPO, "--load-model=m")
    assert "requires setting '--model-control-mode=explicit'" in err


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("python,key=value", ("python", "key", "value")),
        ("key=value", ("", "key", "value")),
        ("python,key=a=b", ("python", "key", "a=b")),
        ("python,key=1,2", ("python", "key", "1,2")),
    ],
)
def test_backend_config_forms(text: str, expected: tuple[str, str, str]) -> None:
    assert parse(f"--backend-config={text}").backend_config == (expected,)


@pytest.mark.parametrize("text", ["foo", "python,key", "python,=v", "python,key=", "=v"])
def test_malformed_backend_config_is_rejected(
    capsys: pytest.CaptureFixture[str], text: str
) -> None:
    err = usage_error(capsys, REPO, f"--backend-config={text}")
    assert (
        f"--backend-config option format is '<backend name>,<setting>=<value>'. Got {text}" in err
    )


def test_backend_config_with_empty_backend_name_is_rejected(
    capsys: pytest.CaptureFixture[str],
) -> None:
    err = usage_error(capsys, REPO, "--backend-config=,key=value")
    assert "No backend specified" in err


def test_choices_fold_case_where_triton_does(capsys: pytest.CaptureFixture[str]) -> None:
    assert parse("--model-control-mode=EXPLICIT").model_control_mode == "explicit"
    assert (
        parse("--grpc-infer-response-compression-level=Low").grpc_infer_response_compression_level
        == "low"
    )
    # Triton compares --log-format exactly.
    err = usage_error(capsys, REPO, "--log-format=iso8601")
    assert "argument --log-format: invalid choice: 'iso8601'" in err
    err = usage_error(capsys, REPO, "--model-control-mode=sometimes")
    assert "argument --model-control-mode: invalid choice: 'sometimes'" in err


def test_switch_takes_no_value_like_triton(capsys: pytest.CaptureFixture[str]) -> None:
    err = usage_error(capsys, REPO, "--disable-auto-complete-config=true")
    assert "argument --disable-auto-complete-config: ignored explicit argument 'true'" in err


DEPRECATION = (
    "Warning: '--strict-model-config' has been deprecated! "
    "Please use '--disable-auto-complete-config' instead."
)


def test_strict_model_config_true_disables_auto_complete(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert parse("--strict-model-config=true").disable_auto_complete_config is True
    assert DEPRECATION in capsys.readouterr().err


def test_strict_model_config_false_keeps_auto_complete(capsys: pytest.CaptureFixture[str]) -> None:
    assert parse("--strict-model-config=false").disable_auto_complete_config is False
    err = capsys.readouterr().err
    assert DEPRECATION in err
    assert "Overriding" not in err


def test_disable_auto_complete_config_overrides_strict_model_config_false(
    capsys: pytest.CaptureFixture[str],
) -> None:
    settings = parse("--strict-model-config=false", "--disable-auto-complete-config")
    assert settings.disable_auto_complete_config is True
    err = capsys.readouterr().err
    assert DEPRECATION in err
    assert (
        "Warning: Overriding deprecated '--strict-model-config' from False to True in favor "
        "of '--disable-auto-complete-config'!"
    ) in err


def test_no_warning_without_the_deprecated_flag(capsys: pytest.CaptureFixture[str]) -> None:
    parse("--disable-auto-complete-config")
    assert capsys.readouterr().err == ""


def test_unknown_flag_is_a_usage_error_naming_it(capsys: pytest.CaptureFixture[str]) -> None:
    err = usage_error(capsys, REPO, "--no-such-flag=1")
    assert "usage: tritium serve [options]" in err
    assert "error: unrecognized arguments: --no-such-flag=1" in err


def test_stray_positional_argument_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    err = usage_error(capsys, REPO, "stray")
    assert "unrecognized arguments: stray" in err


def test_missing_value_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    err = usage_error(capsys, REPO, "--http-port")
    assert "argument --http-port: expected one argument" in err


@pytest.mark.parametrize("flag", ["--host-policy", "--sagemaker-port"])
def test_unsupported_triton_flags_are_refused_by_name(
    capsys: pytest.CaptureFixture[str], flag: str
) -> None:
    err = usage_error(capsys, REPO, f"{flag}=x")
    assert f"{flag} is a tritonserver flag that tritium does not support" in err
    err = usage_error(capsys, REPO, flag)
    assert f"{flag} is a tritonserver flag that tritium does not support" in err


@pytest.mark.parametrize(
    "arg",
    [
        "--rate-limit=off",
        "--rate-limit=OFF",
        "--rate-limit-resource=R1:4",  # without --rate-limit=execution_count: no effect
        "--allow-sagemaker=false",
        "--allow-sagemaker=0",
        "--allow-vertex-ai=false",
        "--allow-vertex-ai=off",
        "--model-namespacing=false",
    ],
)
def test_flags_that_switch_a_feature_off_are_accepted(arg: str) -> None:
    # Issue 29: a tritonserver command line that switches off what tritium lacks keeps working.
    expected = Settings(model_repository=("/models",))
    if arg.startswith("--rate-limit-resource"):
        expected = Settings(model_repository=("/models",), rate_limit_resource=("R1:4",))
    assert parse(arg) == expected


def test_rate_limit_flags(capsys: pytest.CaptureFixture[str]) -> None:
    settings = parse(
        "--rate-limit=EXECUTION_COUNT",
        "--rate-limit-resource=R1:4",
        "--rate-limit-resource=R2:2:1",
    )
    assert settings.rate_limit == "execution_count"
    assert settings.rate_limit_resource == ("R1:4", "R2:2:1")
    err = usage_error(capsys, REPO, "--rate-limit=fastest")
    assert "--rate-limit" in err and "execution_count" in err
    err = usage_error(capsys, REPO, "--rate-limit-resource=R1")
    assert (
        "--rate-limit-resource option format is '<resource_name>:<count>:<device>' or "
        "'<resource_name>:<count>'. Got R1" in err
    )


@pytest.mark.parametrize(
    ("arg", "feature"),
    [
        ("--allow-sagemaker=true", "the SageMaker endpoint"),
        ("--allow-sagemaker", "the SageMaker endpoint"),
        ("--allow-vertex-ai=1", "the Vertex AI endpoint"),
        ("--model-namespacing=true", "model namespacing"),
    ],
)
def test_flags_that_ask_for_a_missing_feature_are_refused_naming_it(
    capsys: pytest.CaptureFixture[str], arg: str, feature: str
) -> None:
    err = usage_error(capsys, REPO, arg)
    assert f"{arg}: tritium does not provide {feature}" in err


def test_old_trace_flags_are_read_as_trace_config(capsys: pytest.CaptureFixture[str]) -> None:
    settings = parse(
        "--trace-file=/tmp/trace.json",
        "--trace-level=TIMESTAMPS",
        "--trace-rate=10",
        "--trace-count=5",
        "--trace-log-frequency=2",
    )
    assert settings.trace_config == (
        "triton,file=/tmp/trace.json",
        "level=TIMESTAMPS",
        "rate=10",
        "count=5",
        "triton,log-frequency=2",
    )
    assert "--trace-level is deprecated in Triton; read as --trace-config level=TIMESTAMPS" in (
        capsys.readouterr().err
    )


def test_help_no_longer_says_tracing_is_missing(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        parse("--help")
    out = " ".join(capsys.readouterr().out.split())
    assert "tracing" not in out.split("are refused")[0].split("does not provide")[-1]
    assert "--trace-file <value>" in out and "--trace-config triton,file=<value>" in out


def test_response_cache_flags() -> None:
    settings = parse("--cache-config=local,size=1048576", "--cache-directory=/opt/caches")
    assert settings.cache_config == ("local,size=1048576",)
    assert settings.cache_directory == "/opt/caches"
    assert parse("--response-cache-byte-size=4096").response_cache_byte_size == 4096


def test_an_empty_cache_config_means_no_cache() -> None:
    # Issue 29: a launch script's `--cache-config=` (no cache) keeps working.
    from tritium.service.cache import parse_cache_config

    settings = parse("--cache-config=")
    assert parse_cache_config(settings.cache_config, settings.response_cache_byte_size) is None


def test_bad_cache_config_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    err = usage_error(capsys, REPO, "--cache-config=redis,host=localhost")
    assert "unsupported cache 'redis'" in err


def test_ignored_triton_flags_are_accepted_with_a_note(capsys: pytest.CaptureFixture[str]) -> None:
    settings = parse(
        "--backend-directory=/opt/tritonserver/backends",
        "--pinned-memory-pool-byte-size=0",
        "--cuda-memory-pool-byte-size",
        "0:0",
        "--http-thread-count=16",
    )
    assert settings == Settings(model_repository=("/models",))
    err = capsys.readouterr().err
    for flag in (
        "--backend-directory",
        "--pinned-memory-pool-byte-size",
        "--cuda-memory-pool-byte-size",
        "--http-thread-count",
    ):
        assert f"tritium serve: note: {flag} has no effect in tritium" in err


def test_help_lists_every_flag_with_its_default(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        parse_settings(["--help"])
    assert exc.value.code == 0
    # argparse wraps long lines; compare with whitespace collapsed.
    text = " ".join(capsys.readouterr().out.split())
    for f in dataclasses.fields(Settings):
        flag = "--" + f.name.replace("_", "-")
        assert flag + " " in text, flag
        default = f.default
        if isinstance(default, bool):
            assert f"(default: {str(default).lower()})" in text
        elif isinstance(default, int):
            assert f"(default: {default})" in text
    for flag in ("--model-store", "--strict-model-config", *IGNORED_FLAGS):
        assert flag + " " in text, flag
    for flag in UNSUPPORTED_FLAGS:
        assert flag + " " not in text, flag


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        cli_main.main(["--version"])
    assert exc.value.code == 0
    assert capsys.readouterr().out.strip() == f"tritium {tritium.__version__}"


class FakeServer:
    def __init__(self) -> None:
        self.calls: list[Settings] = []

    def run(self, settings: Settings) -> int:
        self.calls.append(settings)
        return 7


@pytest.fixture
def fake_server(monkeypatch: pytest.MonkeyPatch) -> FakeServer:
    server = FakeServer()
    monkeypatch.setattr(cli_main, "_server_runner", lambda: server.run)
    return server


def test_serve_runs_the_server_and_returns_its_status(fake_server: FakeServer) -> None:
    assert cli_main.main(["serve", "--model-repository=/m", "--http-port=9000"]) == 7
    assert fake_server.calls == [Settings(model_repository=("/m",), http_port=9000)]


def test_bare_flags_mean_serve_like_tritonserver(fake_server: FakeServer) -> None:
    assert cli_main.main(["--model-repository=/m", "--grpc-port=9001"]) == 7
    assert fake_server.calls == [Settings(model_repository=("/m",), grpc_port=9001)]


def test_serve_errors_show_the_serve_usage(
    capsys: pytest.CaptureFixture[str], fake_server: FakeServer
) -> None:
    for argv in (["serve", "--bogus"], ["--bogus"]):
        with pytest.raises(SystemExit) as exc:
            cli_main.main(argv)
        assert exc.value.code == 2
        err = capsys.readouterr().err
        assert "usage: tritium serve [options]" in err
        assert "unrecognized arguments: --bogus" in err
    assert fake_server.calls == []


def test_no_command_is_a_usage_error(
    capsys: pytest.CaptureFixture[str], fake_server: FakeServer
) -> None:
    with pytest.raises(SystemExit) as exc:
        cli_main.main([])
    assert exc.value.code == 2
    assert "a command is required" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exc:
        cli_main.main(["launch"])
    assert exc.value.code == 2
    assert "invalid choice: 'launch'" in capsys.readouterr().err
    assert fake_server.calls == []


def test_top_level_help_lists_serve(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        cli_main.main(["--help"])
    assert exc.value.code == 0
    assert "serve" in capsys.readouterr().out


def test_tritonserver_command_takes_kserves_triton_runtime_arguments(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The arguments KServe's Triton ServingRuntime passes, verbatim.
    from tritium.cli import tritonserver

    server = FakeServer()
    monkeypatch.setattr(tritonserver, "_server_runner", lambda: server.run)
    argv = [
        "--model-store=/mnt/models",
        "--grpc-port=9000",
        "--http-port=8080",
        "--allow-grpc=true",
        "--allow-http=true",
    ]
    assert tritonserver.main(argv) == 7
    assert server.calls == [
        Settings(
            model_repository=("/mnt/models",),
            grpc_port=9000,
            http_port=8080,
            allow_grpc=True,
            allow_http=True,
        )
    ]


def test_tritonserver_command_names_itself_in_errors(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from tritium.cli import tritonserver

    server = FakeServer()
    monkeypatch.setattr(tritonserver, "_server_runner", lambda: server.run)
    with pytest.raises(SystemExit) as exc:
        tritonserver.main(["--model-store=/m", "--bogus"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "usage: tritonserver [options]" in err
    assert "unrecognized arguments: --bogus" in err
    assert server.calls == []
