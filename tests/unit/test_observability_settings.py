"""Sans-IO: the logging extension's settings, the trace settings and their sampling,
``--trace-config`` parsing, trace timestamps and the server log line format."""

from __future__ import annotations

import logging

import pytest

from tritium.core import InferRequest
from tritium.core.errors import InternalError, InvalidArgument, Unavailable, Unsupported
from tritium.core.log_lines import head
from tritium.server.logging_setup import TritonFormatter, apply
from tritium.service.log_settings import LogSettings
from tritium.service.tracing.recorder import timestamps
from tritium.service.tracing.settings import OTEL_KEY, Sampler, TraceSettings, parse_trace_config

# -- logging settings -------------------------------------------------------------------


def test_log_settings_update_is_all_or_nothing_and_notifies() -> None:
    settings = LogSettings(log_file="/var/log/t.log")
    seen = []
    settings.on_change(seen.append)
    with pytest.raises(InternalError, match="non-boolean"):
        settings.update({"log_verbose_level": 3, "log_info": 1})
    assert settings.as_json()["log_verbose_level"] == 0 and seen == []
    assert settings.update({"log_verbose_level": 3, "unknown": 1})["log_verbose_level"] == 3
    assert seen == [{"log_verbose_level": 3}]
    with pytest.raises(Unsupported):
        settings.update({"log_file": "/var/log/t.log"})
    with pytest.raises(Unavailable, match="invalid argument for --log_format, got: x"):
        settings.update({"log_format": "x"})
    assert settings.update(["not", "an", "object"]) == settings.as_json()


def test_server_lines_are_quoted_except_tables() -> None:
    formatter = TritonFormatter()
    apply({"log_format": "default"})
    record = logging.LogRecord("tritium", logging.INFO, "/x/app.py", 7, "model %s", ("a\nb",), None)
    line = formatter.format(record)
    assert line.endswith('app.py:7] "model a\\nb"') and "\n" not in line
    table = logging.LogRecord("tritium", logging.INFO, "/x/app.py", 8, "\n%s", ("| t |",), None)
    assert formatter.format(table).endswith("app.py:8] \n| t |")
    apply({"log_format": "ISO8601"})
    try:
        assert formatter.format(record)[:22].endswith("Z I")
    finally:
        apply({"log_format": "default"})


def test_line_heads() -> None:
    ns = 1_796_018_342_525_178_901  # 2026-11-30 05:59:02.525178 UTC
    assert head("W", ns, 12, "model.py", 7, "default") == "W1130 05:59:02.525178 12 model.py:7] "
    assert head("E", ns, 12, "model.py", 7, "ISO8601") == "2026-11-30T05:59:02Z E 12 model.py:7] "


# -- trace settings ---------------------------------------------------------------------


def test_sampler_rate_and_count() -> None:
    sampler = Sampler({"trace_rate": "3", "trace_count": "2"})
    assert [sampler.sample() for _ in range(12)] == [False, False, True] * 2 + [False] * 6


def test_per_model_settings_override_and_reset() -> None:
    traces = TraceSettings(
        parse_trace_config(["triton,file=/tmp/t.json", "rate=10"]), lambda name: name != "ghost"
    )
    assert not traces.active and traces.sampler_for("m") is None
    traces.update("m", {"trace_level": ["TIMESTAMPS"], "trace_rate": "1"})
    assert traces.active
    assert traces.sampler_for("m").sample() and traces.sampler_for("other") is None
    assert traces.get("m")["trace_rate"] == "1" and traces.get()["trace_rate"] == "10"
    traces.update("m", {"trace_level": None})
    assert not traces.active
    with pytest.raises(InvalidArgument, match="Request for unknown model : ghost"):
        traces.get("ghost")


def test_zero_rate_is_refused_only_where_it_applies() -> None:
    traces = TraceSettings(parse_trace_config(["triton,file=/t", "rate=0"]))
    traces.update("m", {"trace_rate": "0"})  # level OFF: accepted, as Triton does
    with pytest.raises(InvalidArgument, match="sample rate must be non-zero"):
        traces.update("m", {"trace_level": ["TIMESTAMPS"]})
    assert traces.get("m")["trace_level"] == ["OFF"]


def test_a_zero_rate_at_start_up_samples_nothing() -> None:
    # Triton 2.51 starts with it (in OpenTelemetry mode only requests that bring their
    # own trace context are traced then); the trace setting API still refuses it.
    traces = TraceSettings(parse_trace_config(["rate=0", "level=TIMESTAMPS", "triton,file=/t"]))
    sampler = traces.sampler_for("m")
    assert sampler is not None
    assert not any(sampler.sample() for _ in range(5))
    with pytest.raises(InvalidArgument, match="sample rate must be non-zero"):
        traces.update("", {"trace_rate": "0"})


def test_tracing_needs_a_file() -> None:
    with pytest.raises(Unsupported, match="needs a trace file"):
        TraceSettings().update("", {"trace_level": ["TIMESTAMPS"]})


@pytest.mark.parametrize(
    "entries, message",
    [
        (["level=TIMESTAMPS"], "needs a trace file"),
        (["rate"], "option format"),
        (["mode=zipkin"], "unknown trace mode 'zipkin'"),
        (["opentelemetry,colour=blue"], "unknown opentelemetry setting 'colour'"),
        (["opentelemetry,resource=novalue"], "resource=<key>=<value>"),
        (["opentelemetry,bsp_max_queue_size=0"], "bsp_max_queue_size must be a positive"),
        (
            ["opentelemetry,bsp_max_queue_size=10", "opentelemetry,bsp_max_export_batch_size=11"],
            "bsp_max_export_batch_size must be less than or equal to bsp_max_queue_size",
        ),
        (["triton,colour=blue"], "unknown setting 'colour'"),
        (["level=TENSORS", "triton,file=/t"], "TENSORS is not supported"),
    ],
)
def test_trace_config_errors(entries: list[str], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_trace_config(entries)


def test_trace_config_keys() -> None:
    settings = parse_trace_config(
        ["triton,file=/t.json", "level=TIMESTAMPS", "rate=5", "count=3", "triton,log-frequency=2"]
    )
    assert settings == {
        "trace_level": ["TIMESTAMPS"],
        "trace_rate": "5",
        "trace_count": "3",
        "log_frequency": "2",
        "trace_file": "/t.json",
        "trace_mode": "triton",
    }


def test_opentelemetry_mode_keys() -> None:
    settings = parse_trace_config(
        [
            "mode=opentelemetry",
            "level=TIMESTAMPS",  # no trace file needed in this mode
            "opentelemetry,url=collector:4318/v1/traces",
            "opentelemetry,resource=service.name=edge",
            "opentelemetry,resource=zone=a=b",
            "opentelemetry,bsp_schedule_delay=100",
        ]
    )
    options = settings.pop(OTEL_KEY)
    assert settings["trace_mode"] == "opentelemetry" and settings["trace_level"] == ["TIMESTAMPS"]
    assert options.url == "http://collector:4318/v1/traces"
    assert options.resource == (("service.name", "edge"), ("zone", "a=b"))
    assert options.bsp_setting("bsp_schedule_delay") == 100
    assert options.bsp_setting("bsp_max_queue_size") == 2048  # Triton's default
    # The start-up options stay out of the trace extension's settings.
    traces = TraceSettings({**settings, OTEL_KEY: options})
    assert traces.opentelemetry == options and OTEL_KEY not in traces.get()
    # Triton accepts the other mode's settings and ignores them.
    assert OTEL_KEY not in parse_trace_config(["opentelemetry,url=x", "triton,file=/t"])


def test_timestamps_are_ordered_even_when_the_window_is_tight() -> None:
    request = InferRequest("m")
    request.arrival_ns, request.dispatch_ns = 100, 150
    stamps = timestamps(request, 200, (40, 30))
    assert [ns for _, ns in stamps] == [100, 100, 150, 190, 190, 200, 200]
    # Never dispatched (rejected, cancelled in the queue): no compute stamps.
    assert [name for name, _ in timestamps(InferRequest("m"), 5, None)] == [
        "REQUEST_START",
        "QUEUE_START",
        "REQUEST_END",
    ]
