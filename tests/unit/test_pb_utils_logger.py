"""pb_utils.Logger writes Triton-format log lines; VERBOSE depends on --log-verbose."""

from __future__ import annotations

import io
import os
import re

import pytest

from tritium.backends.python import pb_utils
from tritium.backends.python.pb_utils import Logger
from tritium.backends.python.pb_utils_logger import LogLevel, format_line, reset_logging

# Triton 2.51 server log: I1130 05:59:02.525178 11698 model.py:115] "plain msg"
LINE = re.compile(r'^([IWE])(\d{2})(\d{2}) \d{2}:\d{2}:\d{2}\.\d{6} (\d+) ([^ :]+):(\d+)\] (".*")$')


@pytest.fixture
def log_stream():
    stream = io.StringIO()
    pb_utils._configure_logging(verbose=0, stream=stream)
    yield stream
    reset_logging()


def _lines(stream: io.StringIO) -> list[str]:
    return stream.getvalue().splitlines()


def test_levels_and_format(log_stream):
    Logger.log("plain msg")
    Logger.log_info("info msg")
    Logger.log_warn("warn msg")
    Logger.log_error("err msg")
    Logger.log("as error", Logger.ERROR)
    lines = _lines(log_stream)
    assert len(lines) == 5
    parsed = [LINE.match(line) for line in lines]
    assert all(parsed), lines
    assert [m.group(1) for m in parsed] == ["I", "I", "W", "E", "E"]
    assert [m.group(7) for m in parsed] == [
        '"plain msg"',
        '"info msg"',
        '"warn msg"',
        '"err msg"',
        '"as error"',
    ]
    assert all(int(m.group(4)) == os.getpid() for m in parsed)
    # the caller's file and line, like Triton
    assert {m.group(5) for m in parsed} == {"test_pb_utils_logger.py"}
    linenos = [int(m.group(6)) for m in parsed]
    assert linenos == sorted(linenos) and len(set(linenos)) == 5


def test_message_is_quoted_and_escaped(log_stream):
    Logger.log_info('with "quotes" and\nnewline \u00e9')
    (line,) = _lines(log_stream)
    assert line.endswith('] "with \\"quotes\\" and\\nnewline \u00e9"')


def test_verbose_hidden_unless_enabled(log_stream):
    Logger.log_verbose("hidden")
    Logger.log("hidden too", Logger.VERBOSE)
    assert log_stream.getvalue() == ""
    pb_utils._set_log_verbose(1)
    Logger.log_verbose("shown")
    (line,) = _lines(log_stream)
    assert line.startswith("I")  # Triton prints VERBOSE with an I
    assert line.endswith('] "shown"')


def test_pid_can_be_set(log_stream):
    pb_utils._configure_logging(pid=4242)
    Logger.log_info("x")
    assert LINE.match(_lines(log_stream)[0]).group(4) == "4242"


def test_message_must_be_str(log_stream):
    with pytest.raises(TypeError):
        Logger.log(123)  # type: ignore[arg-type]


def test_log_level_values():
    assert [int(x) for x in (Logger.INFO, Logger.WARNING, Logger.ERROR, Logger.VERBOSE)] == [
        0,
        1,
        2,
        3,
    ]
    assert Logger.LogLevel.WARNING is LogLevel.WARNING
    assert pb_utils.LogLevel is LogLevel


def test_format_line_timestamp_is_utc():
    # 2026-11-30 05:59:02.525178 UTC
    line = format_line(LogLevel.WARNING, "m", "/x/y/model.py", 7, 1_796_018_342_525_178_901, 12)
    assert line == 'W1130 05:59:02.525178 12 model.py:7] "m"\n'
