"""Triton's model repository extension with the real tritonclient over HTTP and gRPC:
index, load (with config and file overrides), unload, control modes, refusals."""

from __future__ import annotations

import http.client
import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from tritium.testing import ServerProcess
from tritium.testing.lifecycle import (
    marked_config,
    marked_inputs,
    marked_model_py,
    write_marked_model,
)

PROTOCOLS = ("http", "grpc")


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("repo")
    for name, mark in (("alpha", 1), ("beta", 2), ("gamma", 3), ("delta", 4), ("fresh", 5)):
        write_marked_model(root, name, mark)
    write_marked_model(root, "slow", 9, instances=2)
    return root


@pytest.fixture(scope="module")
def server(repo: Path) -> Iterator[ServerProcess]:
    args = ["--model-control-mode=explicit", "--load-model=alpha", "--exit-timeout-secs=10"]
    with ServerProcess([repo], args, grpc=True) as running:
        yield running


class Client:
    """One API over both tritonclient flavours."""

    def __init__(self, server: ServerProcess, protocol: str) -> None:
        self.protocol = protocol
        self.module = httpclient if protocol == "http" else grpcclient
        self.url = server.http_url if protocol == "http" else server.grpc_url
        self.raw = self.module.InferenceServerClient(self.url)

    def index(self, ready: bool = False) -> list[dict]:
        found = self.raw.get_model_repository_index() if not ready else None
        if self.protocol == "grpc":
            found = self.raw.get_model_repository_index(as_json=True).get("models", [])
            if ready:
                found = [m for m in found if m.get("state") == "READY"]
        return [dict(m) for m in found]

    def entry(self, name: str) -> list[dict]:
        return [m for m in self.index() if m["name"] == name]

    def mark(self, name: str, ms: int = 0) -> int:
        return int(self.raw.infer(name, marked_inputs(self.module, ms)).as_numpy("MARK")[0])

    def pid(self, name: str) -> int:
        return int(self.raw.infer(name, marked_inputs(self.module)).as_numpy("PID")[0])


@pytest.fixture(params=PROTOCOLS)
def client(request: pytest.FixtureRequest, server: ServerProcess) -> Iterator[Client]:
    c = Client(server, request.param)
    yield c
    c.raw.close()


def _status(exc: InferenceServerException) -> str:
    return str(exc.status())


def test_server_metadata_lists_the_repository_extension(client):
    extensions = client.raw.get_server_metadata()
    if client.protocol == "grpc":
        extensions = list(extensions.extensions)
    else:
        extensions = extensions["extensions"]
    assert "model_repository" in extensions
    assert "model_repository(unload_dependents)" in extensions


def test_index_lists_every_model_folder_loaded_or_not(client):
    index = client.index()
    names = [m["name"] for m in index]
    assert names == sorted(names)
    assert {"alpha", "beta", "gamma", "slow"} <= set(names)
    assert client.entry("alpha") == [{"name": "alpha", "version": "1", "state": "READY"}]
    # Never loaded: only its name, as Triton lists it.
    assert client.entry("fresh") == [{"name": "fresh"}]


def test_load_infer_unload_over_both_protocols(client):
    client.raw.load_model("beta")
    assert client.raw.is_model_ready("beta")
    assert client.mark("beta") == 2
    assert client.entry("beta") == [{"name": "beta", "version": "1", "state": "READY"}]
    client.raw.unload_model("beta")
    assert not client.raw.is_model_ready("beta")
    assert client.entry("beta") == [
        {"name": "beta", "version": "1", "state": "UNAVAILABLE", "reason": "unloaded"}
    ]
    with pytest.raises(InferenceServerException):
        client.mark("beta")
    # An unloaded model does not make the server unready.
    assert client.raw.is_server_ready()


def test_ready_index_lists_only_ready_versions(server):
    c = httpclient.InferenceServerClient(server.http_url)
    conn = http.client.HTTPConnection(server.http_url, timeout=30)
    conn.request("POST", "/v2/repository/index", body=json.dumps({"ready": True}))
    reply = conn.getresponse()
    assert reply.status == 200
    ready = json.loads(reply.read())
    assert ready and all(m["state"] == "READY" for m in ready)
    assert {"name": "alpha", "version": "1", "state": "READY"} in ready
    c.close()


def test_loading_a_model_that_is_in_no_repository(client):
    with pytest.raises(InferenceServerException) as info:
        client.raw.load_model("nope")
    assert "failed to load 'nope', failed to poll from model repository" in str(info.value)
    # Issue 29: a client's mistake (a name in no repository) is a 4xx; Triton's core marks
    # this error NOT_FOUND.
    assert _status(info.value) in ("404", "StatusCode.NOT_FOUND")


def test_unloading_an_unknown_model_succeeds_as_in_triton(client):
    client.raw.unload_model("never_there")


@pytest.mark.parametrize("name", ["", "../alpha", "a/b", "..", "x\0y"])
def test_model_names_that_leave_the_repository_are_refused_over_grpc(server, repo, name):
    c = grpcclient.InferenceServerClient(server.grpc_url)
    before = sorted(p.name for p in repo.iterdir())
    for call in (c.load_model, c.unload_model):
        with pytest.raises(InferenceServerException) as info:
            call(name)
        assert _status(info.value) == "StatusCode.INVALID_ARGUMENT"
        assert "model name must not" in str(info.value)
    assert sorted(p.name for p in repo.iterdir()) == before
    c.close()


@pytest.mark.parametrize("path", ["..%2Falpha", "%2E%2E", "a%2Fb", "x%00y"])
def test_model_names_that_leave_the_repository_are_refused_over_http(server, path):
    conn = http.client.HTTPConnection(server.http_url, timeout=30)
    conn.request("POST", f"/v2/repository/models/{path}/load", body=b"")
    reply = conn.getresponse()
    body = json.loads(reply.read())
    assert reply.status == 400
    assert "model name must not contain path traversal characters" in body["error"]


@pytest.mark.parametrize("key", ["file:../evil.py", "file:/tmp/evil.py", "file:1/../../evil.py"])
def test_file_overrides_that_leave_the_folder_are_refused(client, repo, key):
    before = {p.relative_to(repo) for p in repo.rglob("*")}
    config = json.dumps({"name": "alpha", "backend": "python"})
    with pytest.raises(InferenceServerException) as info:
        client.raw.load_model("alpha", config=config, files={key: b"import os\n"})
    assert _status(info.value) in ("400", "StatusCode.INVALID_ARGUMENT")
    assert f"Invalid file parameter '{key}' must stay within model directory." in str(info.value)
    assert {p.relative_to(repo) for p in repo.rglob("*") if "__pycache__" not in str(p)} <= before
    assert not (repo.parent / "evil.py").exists()
    assert client.mark("alpha") == 1


@pytest.mark.parametrize("key", ["file:1/" + "m" * 256, "file:" + "d" * 256 + "/model.py"])
def test_file_override_with_an_overlong_name_is_the_clients_fault(client, key):
    # A name longer than the file system takes once answered 500 "internal error in model
    # load"; like every other bad override it is the request's fault: 400 with the reason.
    config = json.dumps({"name": "alpha", "backend": "python"})
    with pytest.raises(InferenceServerException) as info:
        client.raw.load_model("alpha", config=config, files={key: b"x = 1\n"})
    assert _status(info.value) in ("400", "StatusCode.INVALID_ARGUMENT")
    assert "path component is longer than 255 bytes" in str(info.value)
    assert client.mark("alpha") == 1


def test_file_override_loads_new_code_without_touching_the_repository(client, repo):
    original = (repo / "gamma" / "1" / "model.py").read_text()
    config = json.dumps(json.loads(_config_json("gamma", instances=1)))
    client.raw.load_model(
        "gamma", config=config, files={"file:1/model.py": marked_model_py(77).encode()}
    )
    assert client.mark("gamma") == 77
    assert (repo / "gamma" / "1" / "model.py").read_text() == original
    # A load without overrides goes back to the repository's files.
    client.raw.load_model("gamma")
    assert client.mark("gamma") == 3
    client.raw.unload_model("gamma")


def test_config_override_changes_the_instance_count(client):
    client.raw.load_model("delta", config=_config_json("delta", instances=3))
    config = client.raw.get_model_config("delta")
    if client.protocol == "grpc":
        count = config.config.instance_group[0].count
    else:
        count = config["instance_group"][0]["count"]
    assert count == 3
    pids = {client.pid("delta") for _ in range(30)}
    assert 1 <= len(pids) <= 3
    client.raw.unload_model("delta")


def test_an_invalid_override_config_keeps_the_loaded_version_serving(client):
    assert client.mark("alpha") == 1
    for config in ('{"name": "alpha", "bogus": 1}', "{nope"):
        with pytest.raises(InferenceServerException) as info:
            client.raw.load_model("alpha", config=config)
        assert "Invalid config override" in str(info.value)
        assert _status(info.value) in ("400", "StatusCode.INVALID_ARGUMENT")
    assert client.mark("alpha") == 1
    assert client.entry("alpha") == [{"name": "alpha", "version": "1", "state": "READY"}]


def test_a_broken_reload_keeps_the_old_version_serving_with_the_reason(client, repo, tmp_path):
    name = f"broken_{client.protocol}"
    write_marked_model(repo, name, 11)
    try:
        client.raw.load_model(name)
        assert client.mark(name) == 11
        write_marked_model(repo, name, 12, init="raise RuntimeError('no weights here')")
        with pytest.raises(InferenceServerException) as info:
            client.raw.load_model(name)
        text = str(info.value)
        assert f"load failed for model '{name}': version 1 is at UNAVAILABLE state:" in text
        # The words Triton's example clients look for in any failed load, before Triton's text.
        assert text.count(f"failed to load '{name}': load failed for model '{name}'") == 1
        assert "no weights here" in text
        assert _status(info.value) in ("400", "StatusCode.INVALID_ARGUMENT")
        assert client.mark(name) == 11
        (entry,) = client.entry(name)
        assert entry["state"] == "READY" and "no weights here" in entry["reason"]
        # Fixed again: the next load serves the new code.
        write_marked_model(repo, name, 13)
        client.raw.load_model(name)
        assert client.mark(name) == 13
    finally:
        client.raw.unload_model(name)


def test_a_model_that_fails_its_first_load_is_listed_with_the_error(client, repo):
    name = f"never_{client.protocol}"
    write_marked_model(repo, name, 1, init="raise ValueError('bad init')")
    with pytest.raises(InferenceServerException) as info:
        client.raw.load_model(name)
    assert f"failed to load '{name}'" in str(info.value) and "bad init" in str(info.value)
    (entry,) = client.entry(name)
    assert entry["state"] == "UNAVAILABLE" and "bad init" in entry["reason"]
    assert not client.raw.is_server_ready()  # a model meant to be loaded is not
    client.raw.unload_model(name)
    assert client.raw.is_server_ready()


def test_a_model_py_that_cannot_be_imported_is_listed_by_version(client, repo):
    # As Triton lists it: the version line, UNAVAILABLE, with the import error.
    name = f"unimportable_{client.protocol}"
    write_marked_model(repo, name, 1)
    (repo / name / "1" / "model.py").write_text("this is not python(\n")
    with pytest.raises(InferenceServerException) as info:
        client.raw.load_model(name)
    assert "SyntaxError" in str(info.value)
    (entry,) = client.entry(name)
    assert entry["version"] == "1" and entry["state"] == "UNAVAILABLE"
    assert "SyntaxError" in entry["reason"]
    client.raw.unload_model(name)


def test_unload_lets_requests_in_flight_finish(client):
    client.raw.load_model("slow")
    results: list[object] = []

    def call() -> None:
        raw = client.module.InferenceServerClient(client.url)
        try:
            inputs = marked_inputs(client.module, 2500)
            results.append(int(raw.infer("slow", inputs).as_numpy("MARK")[0]))
        except Exception as exc:  # noqa: BLE001
            results.append(exc)
        finally:
            raw.close()

    threads = [threading.Thread(target=call) for _ in range(2)]
    for t in threads:
        t.start()
    time.sleep(1.0)  # both requests are running (each sleeps 2.5 s) when the unload arrives
    started = time.monotonic()
    client.raw.unload_model("slow")
    took = time.monotonic() - started
    for t in threads:
        t.join(60)
    assert results == [9, 9]
    assert took >= 1.0  # the unload waited for them
    assert client.entry("slow")[0]["reason"] == "unloaded"


def test_unload_dependents_parameter_is_accepted(client):
    client.raw.load_model("beta")
    client.raw.unload_model("beta", unload_dependents=True)
    assert not client.raw.is_model_ready("beta")


def test_http_body_errors(server):
    def post(path: str, body: bytes) -> tuple[int, dict]:
        conn = http.client.HTTPConnection(server.http_url, timeout=30)
        conn.request("POST", path, body=body)
        reply = conn.getresponse()
        return reply.status, json.loads(reply.read() or b"{}")

    status, body = post(
        "/v2/repository/models/beta/unload", b'{"parameters": {"unload_dependents": "yes"}}'
    )
    assert status == 400 and "Unable to parse 'unload_dependents'" in body["error"]
    status, body = post("/v2/repository/models/beta/load", b"{nope")
    assert status == 400 and "failed to parse the request JSON buffer" in body["error"]
    status, body = post(
        "/v2/repository/models/beta/load", b'{"parameters": {"file:1/model.py": "!!"}}'
    )
    assert status == 400 and "base64" in body["error"]
    status, body = post("/v2/repository/models/beta/load", b'{"parameters": {"unknown": "x"}}')
    assert status == 400 and "Unrecognized load parameter 'unknown'" in body["error"]
    status, body = post("/v2/repository/other/models/beta/load", b"")
    assert status == 501 and body["error"] == "'repository_name' specification is not supported"
    status, body = post("/v2/repository/index", b'{"ready": "yes"}')
    assert status == 400


def test_grpc_parameter_type_errors(server):
    import grpc
    from tritonclient.grpc import service_pb2, service_pb2_grpc

    channel = grpc.insecure_channel(server.grpc_url)
    stub = service_pb2_grpc.GRPCInferenceServiceStub(channel)
    request = service_pb2.RepositoryModelLoadRequest(model_name="beta")
    request.parameters["config"].bytes_param = b"{}"
    with pytest.raises(grpc.RpcError) as info:
        stub.RepositoryModelLoad(request)
    assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert (
        "invalid value type for load parameter 'config', expected string_param."
        in info.value.details()
    )
    request = service_pb2.RepositoryModelUnloadRequest(model_name="beta")
    request.parameters["unload_dependents"].string_param = "yes"
    with pytest.raises(grpc.RpcError) as info:
        stub.RepositoryModelUnload(request)
    assert "expected bool_param" in info.value.details()
    channel.close()


def test_none_mode_answers_tritons_error_for_load_and_unload(repo):
    with ServerProcess([repo], ["--exit-on-error=false"], grpc=True) as none_mode:
        h = httpclient.InferenceServerClient(none_mode.http_url)
        g = grpcclient.InferenceServerClient(none_mode.grpc_url)
        text = "explicit model load / unload is not allowed if polling is enabled"
        for call in (h.load_model, h.unload_model, g.load_model, g.unload_model):
            with pytest.raises(InferenceServerException) as info:
                call("alpha")
            assert text in str(info.value)
            assert _status(info.value) in ("503", "StatusCode.UNAVAILABLE")
        assert {"name": "alpha", "version": "1", "state": "READY"} in h.get_model_repository_index()
        h.close()
        g.close()


# ------------------------------------------------------------------ helpers


def _config_json(name: str, instances: int) -> str:
    return json.dumps(
        {
            "name": name,
            "backend": "python",
            "max_batch_size": 0,
            "input": [{"name": "X", "data_type": "TYPE_INT32", "dims": [1]}],
            "output": [
                {"name": "MARK", "data_type": "TYPE_INT32", "dims": [1]},
                {"name": "PID", "data_type": "TYPE_INT64", "dims": [1]},
            ],
            "instance_group": [{"kind": "KIND_CPU", "count": instances}],
        }
    )


assert marked_config  # the config text the overrides above spell out as JSON
