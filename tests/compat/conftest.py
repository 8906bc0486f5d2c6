"""Run real Triton and tritium side by side on tests/compat/models and talk to both: raw
HTTP, or gRPC through ``tritonclient``.

Real Triton comes from ``$ANCHORS`` (default ``/tmp/anchors``, made by the shared
``setup-anchors.sh``). Test modules skip themselves when it is absent; this file only starts
servers when a test asks for the ``pair`` fixture. Triton is stopped with the shared tools'
``stop-server.sh`` (which also removes its python-backend shared memory), found as ``bench/``
finds it: ``$TRITIUM_SHARED_TOOLS``, else ``../shared/tools`` next to the repository.
"""

from __future__ import annotations

import http.client
import json
import os
import random
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import numpy as np
import pytest
from tritonclient.utils import deserialize_bytes_tensor, serialize_byte_tensor

from tritium.testing import ServerProcess

MODELS = Path(__file__).resolve().parent / "models"
REPO_ROOT = Path(__file__).resolve().parents[2]
ANCHORS = Path(os.environ.get("ANCHORS", "/tmp/anchors"))
TRITONSERVER = ANCHORS / "bin" / "tritonserver"


def shared_tools_dir() -> Path:
    """``$TRITIUM_SHARED_TOOLS`` (relative to the repository when not absolute), else
    ``../shared/tools`` next to the repository root: where ``bench/anchors.py`` looks."""
    env = os.environ.get("TRITIUM_SHARED_TOOLS")
    path = Path(env) if env else REPO_ROOT.parent / "shared" / "tools"
    return path if path.is_absolute() else REPO_ROOT / path


STOP_SERVER = shared_tools_dir() / "stop-server.sh"

# Triton cannot be handed a pre-bound socket, so it gets ports from these ranges (HTTP, and
# gRPC at the same offset); a port that turns out to be taken makes Triton exit at once and
# the next pair is tried.
TRITON_PORTS = range(19400, 19500)
GRPC_OFFSET = 100
TRITON_START_TIMEOUT = 120.0

NUMPY_TYPES = {
    "BOOL": np.bool_,
    "INT32": np.int32,
    "INT64": np.int64,
    "FP32": np.float32,
    "BYTES": np.object_,
}

Tensor = tuple[str, str, np.ndarray]  # (name, datatype, value)


@dataclass(frozen=True)
class Reply:
    """One HTTP answer: status, headers with lower-case names, raw body."""

    status: int
    headers: dict[str, str]
    body: bytes

    @property
    def content_type(self) -> str | None:
        return self.headers.get("content-type")

    def json(self) -> object:
        return json.loads(self.body)

    @property
    def error(self) -> str:
        return json.loads(self.body)["error"]

    def show(self) -> str:
        return f"{self.status} {self.content_type} {self.body[:500]!r}"

    def infer_parts(self) -> tuple[dict, dict[str, np.ndarray]]:
        """The infer response JSON header and every output decoded (JSON or binary data)."""
        return split_infer_reply(self)


@dataclass(frozen=True)
class Endpoint:
    """A server answering HTTP on 127.0.0.1:port (and gRPC on grpc_port, when it has one)."""

    name: str
    port: int
    grpc_port: int | None = None

    @property
    def url(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def grpc_url(self) -> str:
        assert self.grpc_port is not None, f"{self.name} serves no gRPC"
        return f"127.0.0.1:{self.grpc_port}"

    def request(
        self,
        method: str,
        path: str,
        body: bytes | None = None,
        headers: dict[str, str] | None = None,
    ) -> Reply:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
        try:
            conn.request(method, path, body=body, headers=headers or {})
            resp = conn.getresponse()
            return Reply(resp.status, {k.lower(): v for k, v in resp.getheaders()}, resp.read())
        finally:
            conn.close()


def _raw(value: np.ndarray) -> bytes:
    if value.dtype == np.object_:
        return serialize_byte_tensor(value).item() if value.size else b""
    return value.tobytes()


def _json_data(value: np.ndarray) -> list:
    flat = value.reshape(-1)
    if value.dtype == np.object_:
        return [v.decode() if isinstance(v, bytes) else v for v in flat]
    return flat.tolist()


def infer_body(
    inputs: Sequence[Tensor],
    *,
    binary_inputs: bool,
    outputs: Sequence[dict] | None = None,
    parameters: dict | None = None,
    request_id: str | None = None,
) -> tuple[bytes, dict[str, str]]:
    """A KServe v2 infer body, either plain JSON or with binary tensor data appended."""
    header: dict = {}
    if request_id is not None:
        header["id"] = request_id
    header["inputs"] = []
    blobs = []
    for name, datatype, value in inputs:
        tensor: dict = {"name": name, "datatype": datatype, "shape": list(value.shape)}
        if binary_inputs:
            blob = _raw(value)
            blobs.append(blob)
            tensor["parameters"] = {"binary_data_size": len(blob)}
        else:
            tensor["data"] = _json_data(value)
        header["inputs"].append(tensor)
    if outputs is not None:
        header["outputs"] = list(outputs)
    if parameters is not None:
        header["parameters"] = parameters
    head = json.dumps(header).encode()
    if not binary_inputs:
        return head, {"Content-Type": "application/json"}
    return head + b"".join(blobs), {
        "Content-Type": "application/octet-stream",
        "Inference-Header-Content-Length": str(len(head)),
    }


def split_infer_reply(reply: Reply) -> tuple[dict, dict[str, np.ndarray]]:
    """The response JSON header and every output decoded to numpy (JSON or binary data)."""
    header_len = reply.headers.get("inference-header-content-length")
    cut = int(header_len) if header_len is not None else len(reply.body)
    header = json.loads(reply.body[:cut])
    tail = memoryview(reply.body)[cut:]
    tensors = {}
    for out in header["outputs"]:
        dtype = NUMPY_TYPES[out["datatype"]]
        size = out.get("parameters", {}).get("binary_data_size")
        if size is None:
            data = out["data"]
            if dtype is np.object_:
                data = [d.encode() for d in data]
            value = np.array(data, dtype=dtype)
        else:
            chunk, tail = bytes(tail[:size]), tail[size:]
            if dtype is np.object_:
                value = deserialize_bytes_tensor(chunk)
            else:
                value = np.frombuffer(chunk, dtype=dtype)
        tensors[out["name"]] = value.reshape(out["shape"])
    assert len(tail) == 0, "bytes left over after the last binary output"
    return header, tensors


@dataclass(frozen=True)
class Pair:
    """Real Triton and tritium serving the same repository (and where their logs are)."""

    triton: Endpoint
    tritium: Endpoint
    triton_log: Path
    tritium_process: ServerProcess

    def both(
        self,
        method: str,
        path: str,
        body: bytes | None = None,
        headers: dict[str, str] | None = None,
    ) -> tuple[Reply, Reply]:
        theirs = self.triton.request(method, path, body, headers)
        ours = self.tritium.request(method, path, body, headers)
        # Shown by pytest when a comparison fails (and with -rA / -s).
        print(f"{method} {path}\n  triton : {theirs.show()}\n  tritium: {ours.show()}")
        return theirs, ours

    def infer(
        self,
        path: str,
        inputs: Sequence[Tensor],
        *,
        binary_inputs: bool = False,
        outputs: Sequence[dict] | None = None,
        parameters: dict | None = None,
        request_id: str | None = None,
    ) -> tuple[Reply, Reply]:
        """POST the same infer request to both; ``path`` is e.g. ``add_sub/versions/1``."""
        body, headers = infer_body(
            inputs,
            binary_inputs=binary_inputs,
            outputs=outputs,
            parameters=parameters,
            request_id=request_id,
        )
        return self.both("POST", f"/v2/models/{path}/infer", body, headers)


T = TypeVar("T")


def settled(read: Callable[[], T], done: Callable[[T], bool], timeout_s: float = 10.0) -> T:
    """``read()`` again until ``done`` holds for its value (or ``timeout_s`` passes).

    Triton counts a request in its statistics and metrics when the backend releases it,
    which can come a moment after the response has reached the client.
    """
    deadline = time.monotonic() + timeout_s
    while True:
        value = read()
        if done(value) or time.monotonic() > deadline:
            return value
        time.sleep(0.05)


def _port_is_free(port: int) -> bool:
    with socket.socket() as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _listening_inodes(port: int) -> set[str]:
    """Inodes of the sockets listening on TCP ``port`` (any address), from /proc/net."""
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table) as f:
                rows = f.read().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            fields = row.split()
            if fields[3] == "0A" and int(fields[1].rsplit(":", 1)[1], 16) == port:
                inodes.add(fields[9])
    return inodes


def _listens_on(pid: int, port: int) -> bool:
    """Whether process ``pid`` holds a socket listening on ``port``: another server may have
    taken a port of the range between our check and Triton's bind (the range is shared by
    every checkout on the machine), and must not be mistaken for ours."""
    wanted = {f"socket:[{inode}]" for inode in _listening_inodes(port)}
    if not wanted:
        return False
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return False
    for fd in fds:
        try:
            if os.readlink(f"/proc/{pid}/fd/{fd}") in wanted:
                return True
        except OSError:
            continue
    return False


def _live(port: int) -> bool:
    try:
        return Endpoint("probe", port).request("GET", "/v2/health/live").status == 200
    except OSError:
        return False


class TritonProcess:
    """Real ``tritonserver`` on MODELS, HTTP and gRPC.

    The shared start-triton.sh cannot be used here: it waits for /v2/health/ready, which
    never answers 200 under strict readiness because init_fails does not load. Triton opens
    its HTTP port only after the start-up loads are done, so "live" means "loaded".
    """

    def __init__(
        self, workdir: Path, models: Path = MODELS, extra_args: Sequence[str] = ()
    ) -> None:
        self.workdir = workdir
        self.models = models
        self.extra_args = tuple(extra_args)
        self.proc: subprocess.Popen[bytes] | None = None
        self.port: int | None = None
        self.log_path = workdir / "triton.log"
        # Whether this Triton serves gRPC too (on port + GRPC_OFFSET).
        self.grpc = True

    def log_tail(self, lines: int = 40) -> str:
        text = self.log_path.read_text(errors="replace") if self.log_path.exists() else ""
        return "\n".join(text.splitlines()[-lines:])

    def launch(self) -> None:
        # From a random start, so that checkouts starting their Tritons at once rarely race.
        start = random.randrange(len(TRITON_PORTS))
        ports = [*TRITON_PORTS[start:], *TRITON_PORTS[:start]]
        port = next(p for p in ports if _port_is_free(p) and _port_is_free(p + GRPC_OFFSET))
        args = [
            str(TRITONSERVER),
            f"--model-repository={self.models}",
            "--http-address=127.0.0.1",
            f"--http-port={port}",
            "--grpc-address=127.0.0.1",
            f"--grpc-port={port + GRPC_OFFSET}",
            "--allow-metrics=false",
            "--exit-on-error=false",
            "--exit-timeout-secs=10",
            *self.extra_args,
        ]
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen(
                args,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        self.port = port
        (self.workdir / "triton.pid").write_text(str(self.proc.pid))

    def wait_live(self) -> bool:
        """True once live; False when Triton exited first (e.g. the port was taken).

        Live means *this* Triton logged that it serves on its port: on a shared machine
        another Triton may have taken the port while this one was loading, and would
        answer the health check in its place (with other models)."""
        assert self.proc is not None and self.port is not None
        deadline = time.monotonic() + TRITON_START_TIMEOUT
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                return False
            pid = self.proc.pid
            if (
                _listens_on(pid, self.port)
                and (not self.grpc or _listens_on(pid, self.port + GRPC_OFFSET))
                and _live(self.port)
            ):
                return True
            time.sleep(0.2)
        raise RuntimeError(f"Triton not live after {TRITON_START_TIMEOUT}s:\n{self.log_tail()}")

    def stop(self) -> None:
        if self.proc is None:
            return
        if STOP_SERVER.exists():
            # Also removes python-backend shared memory if Triton has to be killed.
            subprocess.run([str(STOP_SERVER), str(self.workdir / "triton.pid"), "20"], check=False)
        elif self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(10)


@pytest.fixture(scope="session")
def pair(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pair]:
    """Both servers on tests/compat/models with --exit-on-error=false, stopped at the end."""
    if not TRITONSERVER.exists():
        pytest.skip(f"real Triton not installed at {TRITONSERVER}")
    triton = TritonProcess(tmp_path_factory.mktemp("triton"))
    tritium = ServerProcess([MODELS], ["--exit-on-error=false"], grpc=True)
    try:
        triton.launch()
        tritium.start()  # loads while Triton loads
        for _ in range(4):
            if triton.wait_live():
                break
            triton.launch()
        else:
            raise RuntimeError(f"Triton did not start:\n{triton.log_tail()}")
        assert tritium.port is not None and triton.port is not None
        yield Pair(
            Endpoint("triton", triton.port, triton.port + GRPC_OFFSET),
            Endpoint("tritium", tritium.port, tritium.grpc_port),
            triton.log_path,
            tritium,
        )
    finally:
        triton.stop()
        tritium.stop()
