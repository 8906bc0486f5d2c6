"""``--trace-config mode=opentelemetry``: Triton's spans (InferRequest → model → compute),
exported over OTLP/HTTP to a receiver run here that decodes them with opentelemetry-proto;
rate and count apply as in file mode; without the SDK the server refuses to start and names
the package to install."""

from __future__ import annotations

import gzip
import queue
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient

# opentelemetry-proto is in the test extra: missing, this test fails rather than skips.
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2

from tritium.testing import ServerProcess  # noqa: E402

from .conftest import EXAMPLE_MODELS  # noqa: E402
from .test_trace import infer, stream_words  # noqa: E402

MODEL_EVENTS = ["REQUEST_START", "QUEUE_START", "REQUEST_END"]
COMPUTE_EVENTS = ["COMPUTE_START", "COMPUTE_INPUT_END", "COMPUTE_OUTPUT_START", "COMPUTE_END"]


class Receiver:
    """An OTLP/HTTP trace receiver: POST /v1/traces, protobuf body, spans kept in order."""

    def __init__(self) -> None:
        self.spans: queue.Queue[tuple[dict[str, object], object]] = queue.Queue(maxsize=10_000)
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's name)
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                if self.headers.get("Content-Encoding") == "gzip":
                    body = gzip.decompress(body)
                if self.path != "/v1/traces":
                    self.send_response(404)
                    self.end_headers()
                    return
                message = trace_service_pb2.ExportTraceServiceRequest()
                message.ParseFromString(body)
                for resource_spans in message.resource_spans:
                    resource = {
                        a.key: a.value.string_value for a in resource_spans.resource.attributes
                    }
                    for scope in resource_spans.scope_spans:
                        for span in scope.spans:
                            receiver.spans.put_nowait((resource, span))
                reply = trace_service_pb2.ExportTraceServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

            def log_message(self, *args: object) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self._server.server_address[1]
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def __enter__(self) -> Receiver:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(10)

    def take(self, n: int, timeout: float = 20.0) -> list[tuple[dict[str, object], object]]:
        deadline = time.monotonic() + timeout
        out = []
        while len(out) < n:
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"{len(out)} spans arrived, expected {n}")
            out.append(self.spans.get(timeout=left))
        return out


def attributes(span: object) -> dict[str, object]:
    out: dict[str, object] = {}
    for a in span.attributes:  # type: ignore[attr-defined]
        value = a.value
        out[a.key] = value.int_value if value.HasField("int_value") else value.string_value
    return out


def launch(receiver: Receiver, *config: str, grpc: str = "native") -> ServerProcess:
    args = [
        f"--grpc-implementation={grpc}",
        "--trace-config=mode=opentelemetry",
        f"--trace-config=opentelemetry,url=127.0.0.1:{receiver.port}/v1/traces",
        "--trace-config=opentelemetry,bsp_schedule_delay=20",
        *(f"--trace-config={c}" for c in config),
        "--model-control-mode=explicit",
        "--load-model=add_sub",
        "--load-model=word_stream",
    ]
    return ServerProcess([EXAMPLE_MODELS], args, grpc=True)


@pytest.fixture(scope="module")
def receiver() -> Iterator[Receiver]:
    with Receiver() as r:
        yield r


def test_spans_have_tritons_names_events_and_attributes(receiver: Receiver) -> None:
    config = ("level=TIMESTAMPS", "rate=1", "opentelemetry,resource=service.name=tritium-test",
              "opentelemetry,resource=deployment=ci")
    with launch(receiver, *config) as server:
        before = time.time_ns()
        seconds = infer(server.http_url, "otel-1")
        after = time.time_ns()
        spans = receiver.take(3)
        assert receiver.spans.empty()
    resource = spans[0][0]
    assert resource["service.name"] == "tritium-test" and resource["deployment"] == "ci"
    by_name = {span.name: span for _, span in spans}
    assert set(by_name) == {"InferRequest", "add_sub", "compute"}
    root, model, compute = by_name["InferRequest"], by_name["add_sub"], by_name["compute"]
    # One trace: compute under the model span, the model span under InferRequest.
    assert root.trace_id == model.trace_id == compute.trace_id
    assert root.parent_span_id == b""
    assert model.parent_span_id == root.span_id and compute.parent_span_id == model.span_id
    assert {s.kind for s in (root, model, compute)} == {2}  # SPAN_KIND_SERVER
    assert attributes(model) == {
        "triton.model_name": "add_sub",
        "triton.model_version": 1,
        "triton.trace_id": 1,
        "triton.trace_parent_id": 0,
        "triton.request_id": "otel-1",
    }
    assert [e.name for e in model.events] == MODEL_EVENTS
    assert [e.name for e in compute.events] == COMPUTE_EVENTS
    stamp = {e.name: e.time_unix_nano for e in [*model.events, *compute.events]}
    ordered = [stamp[n] for n in ["REQUEST_START", "QUEUE_START", *COMPUTE_EVENTS, "REQUEST_END"]]
    assert ordered == sorted(ordered)
    # Wall-clock times within the client's call; spans bounded by their events.
    assert before <= stamp["REQUEST_START"] and stamp["REQUEST_END"] <= after
    assert stamp["REQUEST_END"] - stamp["REQUEST_START"] <= seconds * 1e9
    assert root.start_time_unix_nano == model.start_time_unix_nano == stamp["REQUEST_START"]
    assert root.end_time_unix_nano == model.end_time_unix_nano == stamp["REQUEST_END"]
    assert compute.start_time_unix_nano == stamp["COMPUTE_START"]
    assert compute.end_time_unix_nano == stamp["COMPUTE_END"]


def test_a_decoupled_request_spans_until_its_final_response(receiver: Receiver) -> None:
    words, delay_ms = 3, 10
    with launch(receiver, "level=TIMESTAMPS", "rate=1") as server:
        before = time.time_ns()
        stream_words(server.grpc_url, "otel-stream", words, delay_ms)
        spans = receiver.take(3)
    by_name = {span.name: span for _, span in spans}
    assert set(by_name) == {"InferRequest", "word_stream", "compute"}
    model, compute = by_name["word_stream"], by_name["compute"]
    assert attributes(model)["triton.request_id"] == "otel-stream"
    assert [e.name for e in model.events] == MODEL_EVENTS
    assert [e.name for e in compute.events] == COMPUTE_EVENTS
    assert before <= model.start_time_unix_nano
    # The model span lasts until the last word, each one delay_ms after the one before.
    assert model.end_time_unix_nano - model.start_time_unix_nano >= words * delay_ms * 1_000_000
    assert compute.end_time_unix_nano <= model.end_time_unix_nano


CLIENT_TRACE = "0af7651916cd43dd8448eb211c80319c"
CLIENT_SPAN = "b7ad6b7169203331"


def _add_sub_inputs(client: object) -> list:
    inputs = []
    for name in ("INPUT0", "INPUT1"):
        tensor = client.InferInput(name, [4], "FP32")  # type: ignore[attr-defined]
        tensor.set_data_from_numpy(np.ones(4, np.float32))
        inputs.append(tensor)
    return inputs


@pytest.mark.parametrize("grpc", ["native", "grpcio"])
def test_a_client_trace_context_is_traced_whatever_the_rate(receiver: Receiver, grpc: str) -> None:
    # rate=0: only requests that bring a trace context are traced (as Triton 2.51 does).
    parent = f"00-{CLIENT_TRACE}-{CLIENT_SPAN}-01"
    with launch(receiver, "level=TIMESTAMPS", "rate=0", grpc=grpc) as server:
        with httpclient.InferenceServerClient(server.http_url) as client:
            inputs = _add_sub_inputs(httpclient)
            client.infer("add_sub", inputs, request_id="plain")
            client.infer(
                "add_sub",
                inputs,
                request_id="http-ctx",
                headers={"traceparent": parent, "tracestate": "vendor=1"},
            )
        with grpcclient.InferenceServerClient(server.grpc_url) as client:
            client.infer(
                "add_sub",
                _add_sub_inputs(grpcclient),
                request_id="grpc-ctx",
                headers={"traceparent": parent},
            )
        spans = receiver.take(6)
        time.sleep(0.3)  # the request without a context must not add any
        assert receiver.spans.empty()
    by_request: dict[str, dict[str, object]] = {}
    roots = []
    for _, span in spans:
        request_id = attributes(span).get("triton.request_id")
        if request_id:
            by_request[str(request_id)] = span
        if span.name == "InferRequest":
            roots.append(span)
    assert sorted(by_request) == ["grpc-ctx", "http-ctx"]
    # Every span joins the client's trace; each root's parent is the client's span.
    assert {span.trace_id.hex() for _, span in spans} == {CLIENT_TRACE}
    assert [root.parent_span_id.hex() for root in roots] == [CLIENT_SPAN, CLIENT_SPAN]
    states = {span.trace_state for span in roots}
    assert states == {"vendor=1", ""}


def test_rate_and_count_apply_and_spans_flush_at_shutdown(receiver: Receiver) -> None:
    # A long schedule delay: the spans leave only when the server shuts down.
    server = launch(
        receiver, "level=TIMESTAMPS", "rate=2", "count=2", "opentelemetry,bsp_schedule_delay=600000"
    ).start()
    try:
        for i in range(8):
            infer(server.http_url, f"r{i}")
    finally:
        assert server.stop() == 0
    spans = receiver.take(6)
    assert receiver.spans.empty()
    ids = sorted(attributes(s)["triton.request_id"] for _, s in spans if s.name == "add_sub")
    assert ids == ["r1", "r3"]


def test_trace_setting_reports_the_mode_and_level_needs_no_file(receiver: Receiver) -> None:
    import json
    import urllib.request

    with launch(receiver) as server:
        url = f"http://{server.http_url}/v2/trace/setting"
        with urllib.request.urlopen(url, timeout=10) as reply:
            settings = json.loads(reply.read())
        assert settings["trace_mode"] == "opentelemetry"
        assert settings["trace_level"] == ["OFF"]
        request = urllib.request.Request(
            url, data=json.dumps({"trace_level": ["TIMESTAMPS"], "trace_rate": "1"}).encode()
        )
        with urllib.request.urlopen(request, timeout=10) as reply:
            assert json.loads(reply.read())["trace_level"] == ["TIMESTAMPS"]
        infer(server.http_url, "switched-on")
        names = sorted(span.name for _, span in receiver.take(3))
    assert names == ["InferRequest", "add_sub", "compute"]


def test_without_the_sdk_startup_names_the_package(tmp_path: Path) -> None:
    # The SDK made unimportable, as on a server where it is not installed.
    launcher = tmp_path / "no_otel.py"
    launcher.write_text(
        "import sys\n"
        "sys.modules['opentelemetry.sdk'] = None\n"
        "from tritium.cli.main import main\n"
        "sys.exit(main(sys.argv[1:]))\n"
    )
    server = ServerProcess(
        [EXAMPLE_MODELS], ["--trace-config=mode=opentelemetry"], startup_timeout=60
    )
    server.args[:3] = [sys.executable, str(launcher)]
    with pytest.raises(RuntimeError, match=r"pip install 'tritium\[opentelemetry\]'"):
        server.start()
