"""Logging as Triton logs: the logging extension over HTTP and gRPC, ``--log-file``,
``--log-format``, levels switched at run time (in the server and in running workers), and
request text that cannot forge a log line.

Status codes and texts of the extension are pinned against ``tritonserver`` 2.51.
"""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from tritium.testing import ServerProcess

from .conftest import TEST_MODELS

DEFAULTS = {
    "log_file": "",
    "log_info": True,
    "log_warning": True,
    "log_error": True,
    "log_verbose_level": 0,
    "log_format": "default",
}
DEFAULT_LINE = re.compile(r"^[IWE]\d{4} \d{2}:\d{2}:\d{2}\.\d{6} \d+ [^ ]+:\d+\] ")
ISO_LINE = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z [IWE] \d+ [^ ]+:\d+\] ")


def call(url: str, body: object | None = None) -> tuple[int, object]:
    """GET (or POST ``body`` as JSON) ``url``; (status, decoded JSON answer)."""
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, method="GET" if body is None else "POST")
    try:
        with urllib.request.urlopen(request, timeout=10) as reply:
            return reply.status, json.loads(reply.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def get(url: str) -> object:
    return call(url)[1]


def post(url: str, body: object) -> object:
    return call(url, body)[1]


@pytest.fixture(scope="module")
def server() -> Iterator[ServerProcess]:
    args = ["--model-control-mode=explicit", "--load-model=log_writer"]
    with ServerProcess([TEST_MODELS], args, grpc=True) as s:
        yield s


def say(url: str, text: str) -> None:
    with httpclient.InferenceServerClient(url) as client:
        tensor = httpclient.InferInput("TEXT", [1], "BYTES")
        tensor.set_data_from_numpy(np.array([text.encode()], dtype=np.object_))
        client.infer("log_writer", [tensor])


# ------------------------------------------------------------ the extension, both protocols


def test_http_round_trip(server: ServerProcess) -> None:
    url = f"http://{server.http_url}/v2/logging"
    assert get(url) == DEFAULTS
    changed = {"log_info": False, "log_verbose_level": 2, "log_format": "ISO8601"}
    assert call(url, changed) == (200, {**DEFAULTS, **changed})
    assert get(url) == {**DEFAULTS, **changed}
    back = {"log_info": True, "log_verbose_level": 0, "log_format": "default"}
    assert post(url, back) == DEFAULTS


@pytest.mark.parametrize(
    "body, status, error",
    [
        ({"log_file": "/tmp/elsewhere"}, 501, "log file location can not be updated through network protocol"),
        ({"log_verbose_level": -1}, 500, "attempt to access JSON non-unsigned-integer as unsigned-integer"),
        ({"log_info": "yes"}, 500, "attempt to access JSON non-boolean as boolean"),
        ({"log_format": "bad"}, 503, "invalid argument for --log_format, got: bad"),
    ],
)
def test_http_refusals_match_triton(server: ServerProcess, body, status, error) -> None:
    url = f"http://{server.http_url}/v2/logging"
    assert call(url, {**body, "log_error": False}) == (status, {"error": error})
    # All or nothing: the valid key of a refused request is not applied either.
    assert get(url) == DEFAULTS


def test_grpc_round_trip(server: ServerProcess) -> None:
    with grpcclient.InferenceServerClient(server.grpc_url) as client:
        assert client.get_log_settings(as_json=True)["settings"] == {
            "log_file": {"string_param": ""},
            "log_info": {"bool_param": True},
            "log_warning": {"bool_param": True},
            "log_error": {"bool_param": True},
            "log_verbose_level": {"uint32_param": 0},
            "log_format": {"string_param": "default"},
        }
        reply = client.update_log_settings({"log_warning": False, "log_verbose_level": 1}, as_json=True)
        assert reply["settings"]["log_warning"] == {"bool_param": False}
        assert reply["settings"]["log_verbose_level"] == {"uint32_param": 1}
        # The same settings over HTTP: one state, two protocols.
        over_http = get(f"http://{server.http_url}/v2/logging")
        assert over_http["log_warning"] is False and over_http["log_verbose_level"] == 1
        with pytest.raises(InferenceServerException, match="log file location can not be updated"):
            client.update_log_settings({"log_file": "/tmp/x"})
        client.update_log_settings({"log_warning": True, "log_verbose_level": 0})
        assert client.get_log_settings(as_json=True)["settings"]["log_warning"] == {"bool_param": True}


def test_logging_is_listed_as_an_extension(server: ServerProcess) -> None:
    with httpclient.InferenceServerClient(server.http_url) as client:
        assert "logging" in client.get_server_metadata()["extensions"]


# ------------------------------------------------------------ the log itself


def test_levels_reach_running_workers(server: ServerProcess) -> None:
    url = f"http://{server.http_url}/v2/logging"
    say(server.http_url, "quiet-1")
    assert server.wait_for_log(r'model.py:\d+\] "log_writer says quiet-1"')
    assert "log_writer verbose quiet-1" not in server.log
    post(url, {"log_verbose_level": 1})
    try:
        say(server.http_url, "loud-2")
        assert server.wait_for_log(r'"log_writer verbose loud-2"')
        post(url, {"log_verbose_level": 0, "log_info": False})
        say(server.http_url, "muted-3")
        say(server.http_url, "muted-3b")  # one more round trip: the worker had its chance
        assert "muted-3" not in server.log
    finally:
        post(url, {"log_verbose_level": 0, "log_info": True})


def test_request_text_cannot_forge_a_line(server: ServerProcess) -> None:
    forged = 'E1201 22:00:00.000000 1 forged.py:1] "owned"'
    say(server.http_url, f'inject\n{forged}\r\n"quote" \\ end')
    assert server.wait_for_log(r"log_writer says inject")
    lines = server.log.splitlines()
    assert not any(line.startswith("E1201 22:00:00.000000 1 forged.py") for line in lines)
    (line,) = [line for line in lines if "log_writer says inject" in line]
    assert DEFAULT_LINE.match(line)
    assert " log_writer/1/model.py:" in line  # named by model, from the repository root
    assert line.endswith(r'"log_writer says inject\nE1201 22:00:00.000000 1 forged.py:1] \"owned\"\r\n\"quote\" \\ end"')


def test_model_error_traceback_is_readable_and_forges_no_line(server: ServerProcess) -> None:
    with pytest.raises(InferenceServerException):
        say(server.http_url, "raise:\nE1201 22:00:00.000000 1 forged.py:1] fake")
    assert server.wait_for_log(r"ValueError: raise:")
    lines = server.log.splitlines()
    assert not any(line.startswith("E1201 22:00:00.000000 1 forged.py") for line in lines)
    (line,) = [line for line in lines if "Traceback" in line]
    assert line.startswith("E") and DEFAULT_LINE.match(line)
    # Readable in a terminal: the traceback's own lines follow, indented, not escaped.
    at = lines.index(line)
    assert line.endswith('"Traceback (most recent call last):"')
    assert "  ValueError: raise:" in lines[at + 1 :]
    assert "  E1201 22:00:00.000000 1 forged.py:1] fake" in lines[at + 1 :]


def _serve_to_file(log_file: Path, *extra: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [
            sys.executable, "-m", "tritium", "serve",
            f"--model-repository={TEST_MODELS}", "--model-control-mode=explicit",
            "--load-model=log_writer", "--http-port=0", "--allow-grpc=false",
            "--allow-metrics=false", f"--log-file={log_file}", *extra,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )


def _wait_for(path: Path, pattern: str, timeout: float = 60.0) -> re.Match[str]:
    regex = re.compile(pattern)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = regex.search(path.read_text()) if path.exists() else None
        if found:
            return found
        time.sleep(0.05)
    raise AssertionError(f"{pattern!r} not in {path}:\n{path.read_text() if path.exists() else ''}")


def test_log_file_iso8601_and_append(tmp_path: Path) -> None:
    log_file = tmp_path / "server.log"
    log_file.write_text("an earlier line\n")
    proc = _serve_to_file(log_file, "--log-format=ISO8601")
    try:
        port = _wait_for(log_file, r"Started HTTPService at [^:]+:(\d+)").group(1)
        url = f"127.0.0.1:{port}"
        say(url, "to-the-file")
        _wait_for(log_file, "log_writer says to-the-file")
        assert get(f"http://{url}/v2/logging")["log_file"] == str(log_file)
        post(f"http://{url}/v2/logging", {"log_format": "default"})
        say(url, "now-default")
        _wait_for(log_file, "log_writer says now-default")
    finally:
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0
    assert err == b"" and out == b""  # the terminal keeps nothing
    lines = log_file.read_text().splitlines()
    assert lines[0] == "an earlier line"
    (iso,) = [line for line in lines if "to-the-file" in line]
    assert ISO_LINE.match(iso) and "model.py:" in iso
    assert any(ISO_LINE.match(line) and "Started HTTPService" in line for line in lines)
    (default,) = [line for line in lines if "now-default" in line]
    assert DEFAULT_LINE.match(default)


def test_unwritable_log_file_is_a_clear_error(tmp_path: Path) -> None:
    proc = _serve_to_file(tmp_path / "missing-dir" / "server.log")
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 1
    assert b"cannot open --log-file" in err
