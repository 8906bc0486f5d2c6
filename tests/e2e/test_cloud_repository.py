"""Cloud model repositories (``--model-repository=s3://host:port/bucket/path``, Triton's
spelling for a private S3 instance), against a real S3 server on loopback (moto's): the
server copies the store into a local folder at start, serves it, follows it in poll mode
(downloading only what changed) and in explicit mode (a load after an upload), and a store
it cannot read is one start-up line and exit status 1."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

pytest.importorskip("s3fs", reason="s3:// repositories need s3fs (pip install 'tritium[s3]')")
pytest.importorskip("moto.server", reason="the S3 server for these tests is moto[server]")

import tritonclient.grpc as grpcclient  # noqa: E402
import tritonclient.http as httpclient  # noqa: E402
from tritonclient.utils import InferenceServerException  # noqa: E402

from tritium.testing import ServerProcess  # noqa: E402
from tritium.testing.lifecycle import marked_inputs, write_marked_model  # noqa: E402
from tritium.testing.object_store import S3Store, s3_server  # noqa: E402


@pytest.fixture(scope="module")
def store() -> Iterator[S3Store]:
    with s3_server() as running:
        yield running


_buckets = iter(range(1_000_000))


@pytest.fixture
def bucket(store: S3Store) -> str:
    name = f"models-{next(_buckets)}"
    store.create_bucket(name)
    return name


def _upload_marked(store: S3Store, tmp: Path, path: str, name: str, mark: int) -> None:
    staging = tmp / f"staging-{name}-{mark}"
    write_marked_model(staging, name, mark)
    store.upload(staging, path)


def _mark(client: httpclient.InferenceServerClient, name: str) -> int:
    return int(client.infer(name, marked_inputs(httpclient)).as_numpy("MARK")[0])


def _eventually(check: Callable[[], bool], timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            if check():
                return
        except InferenceServerException:
            pass
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached in time")
        time.sleep(0.1)


def test_serves_an_s3_repository_over_http_and_grpc(store: S3Store, bucket: str, tmp_path):
    _upload_marked(store, tmp_path, f"{bucket}/repo", "alpha", 7)
    with ServerProcess([store.url(f"{bucket}/repo")], env=store.env, grpc=True) as server:
        assert f"model repository '{store.url(f'{bucket}/repo')}' copied to" in server.log
        http = httpclient.InferenceServerClient(server.http_url)
        assert _mark(http, "alpha") == 7
        grpc = grpcclient.InferenceServerClient(server.grpc_url)
        result = grpc.infer("alpha", marked_inputs(grpcclient))
        assert int(result.as_numpy("MARK")[0]) == 7


def test_poll_mode_follows_the_store_and_fetches_only_what_changed(
    store: S3Store, bucket: str, tmp_path
):
    location = f"{bucket}/repo"
    _upload_marked(store, tmp_path, location, "alpha", 1)
    mount = tmp_path / "mount"
    mount.mkdir()
    env = {**store.env, "TRITON_AWS_MOUNT_DIRECTORY": str(mount)}
    args = ["--model-control-mode=poll", "--repository-poll-secs=1"]
    with ServerProcess([store.url(location)], args, env=env) as server:
        client = httpclient.InferenceServerClient(server.http_url)
        assert _mark(client, "alpha") == 1
        config = mount / "alpha" / "config.pbtxt"
        config_mtime = config.stat().st_mtime_ns

        # New code in the store: reloaded; the unchanged config was not fetched again.
        staging = tmp_path / "staging-2"
        write_marked_model(staging, "alpha", 2)
        store.client.upload_file(
            str(staging / "alpha" / "1" / "model.py"), bucket, "repo/alpha/1/model.py"
        )
        _eventually(lambda: _mark(client, "alpha") == 2)
        assert config.stat().st_mtime_ns == config_mtime

        # A model added to the store loads; one deleted from it unloads.
        _upload_marked(store, tmp_path, location, "beta", 3)
        _eventually(lambda: _mark(client, "beta") == 3)
        store.delete(f"{location}/alpha/")
        _eventually(lambda: not client.is_model_ready("alpha"))
        assert not (mount / "alpha").exists()
        assert _mark(client, "beta") == 3


def test_explicit_load_fetches_a_model_uploaded_after_start(
    store: S3Store, bucket: str, tmp_path
):
    location = f"{bucket}/repo"
    store.client.put_object(Bucket=bucket, Key="repo/README", Body=b"models go here")
    args = ["--model-control-mode=explicit"]
    with ServerProcess([store.url(location)], args, env=store.env) as server:
        client = httpclient.InferenceServerClient(server.http_url)
        with pytest.raises(InferenceServerException, match="failed to poll from model"):
            client.load_model("alpha")

        _upload_marked(store, tmp_path, location, "alpha", 1)
        client.load_model("alpha")
        assert _mark(client, "alpha") == 1

        # A change in the store is picked up by the next load (and only by it).
        _upload_marked(store, tmp_path, location, "alpha", 2)
        assert _mark(client, "alpha") == 1
        client.load_model("alpha")
        assert _mark(client, "alpha") == 2


def _start_failure(url: str, env: dict[str, str]) -> str:
    """The one error line of a start-up that must fail with status 1."""
    result = subprocess.run(
        [sys.executable, "-m", "tritium", "serve", f"--model-repository={url}",
         "--http-port=0", "--allow-grpc=false", "--allow-metrics=false"],
        env=env, capture_output=True, text=True, timeout=120,
    )
    assert result.returncode == 1, result.stderr
    assert "Traceback" not in result.stderr, result.stderr
    errors = [line for line in result.stderr.splitlines() if line.startswith("E")]
    assert len(errors) == 1, result.stderr
    return errors[0]


def test_bad_credentials_fail_start_up_in_one_line(store: S3Store, bucket: str, tmp_path):
    _upload_marked(store, tmp_path, f"{bucket}/repo", "alpha", 1)
    url = store.url(f"{bucket}/repo")
    with store.require_auth():
        line = _start_failure(url, store.env)
    assert f"model repository '{url}'" in line
    assert "Access Key Id you provided does not exist" in line


def test_a_missing_bucket_or_path_fails_start_up_in_one_line(store: S3Store, bucket: str):
    for path in ("no-such-bucket/repo", f"{bucket}/no/such/path"):
        url = store.url(path)
        assert f"model repository '{url}' does not exist" in _start_failure(url, store.env)
