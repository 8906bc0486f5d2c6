"""What a newcomer meets first (issue 29): start-up failures as one clear line, Triton's
model life-cycle log lines, --log-verbose saying what the server does, a failed model's
reason where a client sees it, and warnings for outputs the config does not describe.

Log texts matched against ``tritonserver`` 2.51: ``loading: <model>:<version>``,
``successfully loaded '<model>'``, ``successfully unloaded '<model>' version <n>``,
``failed to load '<model>' version <n>: <reason>``; a port in use starts with Triton's
``failed to start <HTTP|GRPC|Metrics> service``.
"""

from __future__ import annotations

import importlib.util
import json
import re
import socket
import subprocess
import sys
import textwrap
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

LOG_LINE = re.compile(r"^[IWE]\d{4} \d{2}:\d{2}:\d{2}\.\d{6} \d+ [^ ]+:\d+\] ")

CONFIG = """
name: "{name}"
backend: "python"
max_batch_size: 8
{extra}
input [ {{ name: "IN" data_type: TYPE_FP32 dims: [ 4 ] }} ]
output [ {{ name: "OUT" data_type: TYPE_FP32 dims: [ 4 ] }} ]
instance_group [ {{ kind: KIND_CPU count: 1 }} ]
"""

MODELS = {
    # Returns OUT as FP64 (the config says FP32) and an output the config does not name.
    "sloppy": (
        "dynamic_batching { max_queue_delay_microseconds: 1000 }",
        """
        def execute(self, requests):
            out = []
            for request in requests:
                x = pb_utils.get_input_tensor_by_name(request, "IN").as_numpy()
                out.append(pb_utils.InferenceResponse([
                    pb_utils.Tensor("OUT", x.astype(np.float64)),
                    pb_utils.Tensor("EXTRA", x),
                ]))
            return out
        """,
    ),
    "broken": (
        "",
        """
        def initialize(self, args):
            raise RuntimeError("the weights file is missing")

        def execute(self, requests):
            return []
        """,
    ),
    "forgetful": (
        "",
        """
        def execute(self, requests):
            return None
        """,
    ),
}


def write_model(repo: Path, name: str, extra: str, body: str) -> None:
    (repo / name / "1").mkdir(parents=True)
    (repo / name / "config.pbtxt").write_text(CONFIG.format(name=name, extra=extra))
    source = "import numpy as np\nimport triton_python_backend_utils as pb_utils\n\n\n"
    source += "class TritonPythonModel:\n" + textwrap.indent(textwrap.dedent(body), "    ")
    (repo / name / "1" / "model.py").write_text(source)


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("first_contact")
    for name, (extra, body) in MODELS.items():
        write_model(root, name, extra, body)
    return root


@pytest.fixture(scope="module")
def server(repo: Path) -> Iterator[ServerProcess]:
    args = [
        "--model-control-mode=explicit",
        "--load-model=*",
        "--exit-on-error=false",
        "--strict-readiness=false",
        "--log-verbose=1",
        "--grpc-implementation=native",
    ]
    with ServerProcess([repo], args, grpc=True) as s:
        yield s


def call(server: ServerProcess, method: str, path: str, body: object = None) -> tuple[int, dict]:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(f"http://{server.http_url}{path}", data=data, method=method)
    try:
        with urllib.request.urlopen(request, timeout=60) as reply:
            text = reply.read()
            return reply.status, json.loads(text) if text else {}
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def infer(url: str, model: str, module=httpclient):  # noqa: ANN001, ANN201
    client = module.InferenceServerClient(url)
    tensor = module.InferInput("IN", [1, 4], "FP32")
    tensor.set_data_from_numpy(np.ones((1, 4), np.float32))
    try:
        return client.infer(model, [tensor])
    finally:
        client.close()


# ----------------------------------------------------------------- 1. start-up failures


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tritium", "serve", *args],
        capture_output=True,
        text=True,
        timeout=120,
    )


def one_error_line(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 1, result.stderr
    assert "Traceback" not in result.stderr, result.stderr
    errors = [line for line in result.stderr.splitlines() if line.startswith("E")]
    assert len(errors) == 1, result.stderr
    assert LOG_LINE.match(errors[0])
    return errors[0]


@pytest.mark.parametrize(
    ("location", "words"),
    [
        ("{tmp}/missing", "model repository '{tmp}/missing' does not exist"),
        ("{tmp}/a_file", "model repository '{tmp}/a_file' is not a directory"),
        ("ftp://host/models", "model repository 'ftp://host/models': 'ftp://' locations are"),
        ("s3://", "model repository 's3://': no bucket named"),
        ("as://account", "model repository 'as://account': no container named"),
    ],
)
def test_a_wrong_model_repository_is_one_line_and_status_1(
    tmp_path: Path, location: str, words: str
) -> None:
    (tmp_path / "a_file").write_text("not a folder")
    location = location.format(tmp=tmp_path)
    line = one_error_line(
        run_cli(f"--model-repository={location}", "--http-port=0", "--allow-grpc=false",
                "--allow-metrics=false")
    )
    assert words.format(tmp=tmp_path) in line
    assert "s3:/bucket" not in line.replace("s3://bucket", "")  # not mangled by a Path


@pytest.mark.parametrize(
    ("location", "package", "extra"),
    [("gs://bucket/models", "gcsfs", "gcs"), ("as://account/container", "adlfs", "azure")],
)
def test_a_cloud_repository_without_its_extra_says_what_to_install(
    location: str, package: str, extra: str
) -> None:
    if importlib.util.find_spec(package) is not None:
        pytest.skip(f"{package} is installed here")
    line = one_error_line(
        run_cli(f"--model-repository={location}", "--http-port=0", "--allow-grpc=false",
                "--allow-metrics=false")
    )
    assert f"model repository '{location}'" in line
    assert f"needs the {package} package: pip install 'tritium[{extra}]'" in line


@pytest.mark.parametrize(
    ("flag", "service"), [("--http-port", "HTTP"), ("--grpc-port", "GRPC"),
                          ("--metrics-port", "Metrics")]
)
def test_a_port_in_use_names_the_endpoint_and_its_flag(
    tmp_path: Path, flag: str, service: str
) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        ports = {"--http-port": "0", "--grpc-port": "0", "--metrics-port": "0", flag: str(port)}
        result = run_cli(
            f"--model-repository={tmp_path}",
            "--http-address=127.0.0.1",
            "--grpc-address=127.0.0.1",
            "--metrics-address=127.0.0.1",
            *(f"{k}={v}" for k, v in ports.items()),
        )
    line = one_error_line(result)
    assert (
        f"failed to start {service} service: cannot bind 127.0.0.1:{port} ({flag}): " in line
    )


# ----------------------------------------------------------------- 2. life-cycle lines


def test_start_up_logs_each_load_with_triton_texts(server: ServerProcess) -> None:
    assert server.wait_for_log(r"successfully loaded 'sloppy'", timeout=30)
    log = server.log
    assert '"loading: sloppy:1"' in log
    assert '"successfully loaded \'forgetful\'"' in log
    assert (
        "\"failed to load 'broken' version 1: Failed to initialize model instance "
        "'broken_0_0': RuntimeError: the weights file is missing\""
    ) in log


def test_repository_api_load_and_unload_are_logged(repo: Path, server: ServerProcess) -> None:
    assert call(server, "POST", "/v2/repository/models/forgetful/unload", {})[0] == 200
    assert server.wait_for_log(r"successfully unloaded 'forgetful' version 1", timeout=30)
    assert call(server, "POST", "/v2/repository/models/forgetful/load", {})[0] == 200
    assert logged_times(server, "successfully loaded 'forgetful'") == 2
    status, body = call(server, "POST", "/v2/repository/models/broken/load", {})
    assert status == 400
    assert logged_times(server, "failed to load 'broken' version 1: ") == 2
    # The answer says the words Triton's example clients look for, then Triton's own text.
    head = "failed to load 'broken': load failed for model 'broken': version 1 is at UNAVAILABLE"
    assert body["error"].startswith(head) and "the weights file is missing" in body["error"]
    client = grpcclient.InferenceServerClient(server.grpc_url)
    try:
        with pytest.raises(InferenceServerException) as info:
            client.load_model("broken")
    finally:
        client.close()
    assert head in str(info.value) and "the weights file is missing" in str(info.value)


def logged_times(server: ServerProcess, text: str, expected: int = 2, timeout: float = 30.0) -> int:
    """How often ``text`` is in the log once it reaches ``expected`` (or ``timeout`` passes):
    the server's log reaches the test through a pipe, after the answer may have."""
    deadline = time.monotonic() + timeout
    while server.log.count(text) < expected and time.monotonic() < deadline:
        time.sleep(0.02)
    return server.log.count(text)


def test_poll_mode_logs_what_it_loads(tmp_path: Path) -> None:
    args = ["--model-control-mode=poll", "--repository-poll-secs=1"]
    with ServerProcess([tmp_path], args) as s:
        write_model(tmp_path, "late", *MODELS["forgetful"])
        assert s.wait_for_log(r'"loading: late:1"', timeout=60)
        assert s.wait_for_log(r"successfully loaded 'late'", timeout=60)


# ------------------------------------------------------------ 3. what --log-verbose says


def test_verbose_logs_connections_requests_batches_and_instances(server: ServerProcess) -> None:
    infer(server.http_url, "sloppy")
    infer(server.grpc_url, "sloppy", grpcclient)
    assert server.wait_for_log(r"HTTP request: POST /v2/models/sloppy/infer: 200", timeout=30)
    assert server.wait_for_log(r"GRPC call: ModelInfer: status 0 \(OK\)", timeout=30)
    log = server.log
    assert re.search(r"HTTP connection from \('127\.0\.0\.1', \d+\) opened", log)
    assert re.search(r"GRPC connection from \('127\.0\.0\.1', \d+\) opened", log)
    assert re.search(r"batch of 1 requests \(1 rows\) to sloppy_0_0; waited [\d.]+ ms", log)
    assert re.search(r"instance 'sloppy_0_0' started \(pid \d+\)", log)


@pytest.fixture(scope="module")
def grpcio_server(repo: Path) -> Iterator[ServerProcess]:
    args = ["--model-control-mode=explicit", "--load-model=sloppy", "--log-verbose=1"]
    with ServerProcess([repo], [*args, "--grpc-implementation=grpcio"], grpc=True) as s:
        yield s


@pytest.mark.parametrize("transport", ["native", "grpcio"])
def test_verbose_logs_each_grpc_call_on_both_transports(
    transport: str, request: pytest.FixtureRequest
) -> None:
    server = request.getfixturevalue("server" if transport == "native" else "grpcio_server")
    infer(server.grpc_url, "sloppy", grpcclient)
    with pytest.raises(InferenceServerException):
        infer(server.grpc_url, "nowhere", grpcclient)
    client = grpcclient.InferenceServerClient(server.grpc_url)
    replies: list[object] = []
    try:
        client.start_stream(callback=lambda result, error: replies.append(result or error))
        tensor = grpcclient.InferInput("IN", [1, 4], "FP32")
        tensor.set_data_from_numpy(np.ones((1, 4), np.float32))
        client.async_stream_infer("sloppy", [tensor])
        deadline = time.monotonic() + 60
        while not replies and time.monotonic() < deadline:
            time.sleep(0.01)
        client.stop_stream()
    finally:
        client.close()
    assert replies and not isinstance(replies[0], InferenceServerException)
    assert server.wait_for_log(r"GRPC call: ModelInfer: status 0 \(OK\)", timeout=30)
    assert server.wait_for_log(r"GRPC call: ModelInfer: status 5: [^\n]*'nowhere'", timeout=30)
    assert server.wait_for_log(r"GRPC call: ModelStreamInfer: status 0 \(OK\)", timeout=30)


def test_grpcio_logs_no_call_without_verbose(repo: Path) -> None:
    args = ["--model-control-mode=explicit", "--load-model=sloppy", "--grpc-implementation=grpcio"]
    with ServerProcess([repo], args, grpc=True) as s:
        infer(s.grpc_url, "sloppy", grpcclient)
    # The server has exited and its whole log has been read.
    assert "successfully loaded 'sloppy'" in s.log
    assert "GRPC call:" not in s.log


# ----------------------------------------------------- 5. reasons where a client sees them


def test_a_request_to_a_model_that_failed_to_load_gets_the_reason(server: ServerProcess) -> None:
    with pytest.raises(InferenceServerException) as info:
        infer(server.http_url, "broken")
    text = str(info.value)
    assert "Request for unknown model: 'broken' has no available versions" in text
    assert "failed to load 'broken'" in text and "the weights file is missing" in text


def test_loading_a_model_in_no_repository_is_404_naming_it(server: ServerProcess) -> None:
    status, body = call(server, "POST", "/v2/repository/models/nowhere/load", {})
    assert status == 404
    assert body["error"] == "failed to load 'nowhere', failed to poll from model repository"


def test_a_malformed_config_override_names_the_failed_load(server: ServerProcess) -> None:
    status, body = call(
        server, "POST", "/v2/repository/models/sloppy/load", {"parameters": {"config": "{oops"}}
    )
    assert status == 400
    assert body["error"].startswith("failed to load 'sloppy': Invalid config override: ")


# ------------------------------------------------------------------ 9. small things


@pytest.mark.parametrize("model", ["nowhere", "broken"])
def test_model_ready_answers_json_as_json(server: ServerProcess, model: str) -> None:
    reply = urllib.request.Request(f"http://{server.http_url}/v2/models/{model}/ready")
    with pytest.raises(urllib.error.HTTPError) as info:
        urllib.request.urlopen(reply, timeout=60)
    assert info.value.code == 400
    assert info.value.headers["Content-Type"] == "application/json"
    assert json.loads(info.value.read()) == {"error": "Model version not ready"}


def test_execute_returning_none_says_what_was_expected(server: ServerProcess) -> None:
    with pytest.raises(InferenceServerException) as info:
        infer(server.http_url, "forgetful")
    text = str(info.value)
    assert "NoneType" not in text
    assert "expected 1 responses, got None: execute must return a list" in text


def test_outputs_unlike_the_config_are_warned_about_once(server: ServerProcess) -> None:
    for _ in range(3):
        infer(server.http_url, "sloppy")
    assert server.wait_for_log(r"returned output 'EXTRA', which is not in its config", timeout=30)
    time.sleep(0.2)
    log = server.log
    assert log.count("returned output 'EXTRA', which is not in its config; it is dropped") == 1
    assert (
        log.count(
            "model 'sloppy' returned output 'OUT' as FP64 with shape [1, 4], but its config "
            "says FP32 with dims [batch] + [4]"
        )
        == 1
    )
    warning = next(line for line in log.splitlines() if "returned output 'OUT'" in line)
    assert warning.startswith("W")
