"""Start and stop the two servers under test — real Triton and tritium — on one repository.

Both are started in their own session (process group) and always stopped through `stop()`,
which is safe to call twice and also after a failed start, and which leaves no process of the
group behind.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any, Protocol

from bench.anchors import Anchors, BenchSetupError
from tritium.testing import ServerProcess

READY_TIMEOUT_S = 180.0
# Both servers get the same switches: no metrics endpoint, and a 1 MiB local response
# cache (used only by models that opt in: identity_cached).
COMMON_FLAGS = ("--allow-metrics=false", "--cache-config=local,size=1048576")

_NO_PROXY = urllib.request.build_opener(urllib.request.ProxyHandler({}))


class Server(Protocol):
    """What the benchmark needs from a server under test."""

    name: str

    @property
    def url(self) -> str: ...

    @property
    def grpc_url(self) -> str: ...

    @property
    def pgid(self) -> int | None:
        """Process group of the running server and its children, None when not started."""

    def start(self) -> None: ...

    def stop(self) -> None: ...


def http_get(url: str, timeout: float = 3.0) -> tuple[int, bytes]:
    """GET `url` bypassing any proxy; (status, body), status 0 when nothing answers."""
    try:
        with _NO_PROXY.open(url, timeout=timeout) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()
    except (OSError, urllib.error.URLError):
        return 0, b""


def http_post_json(url: str, body: bytes, timeout: float = 10.0) -> tuple[int, bytes]:
    """POST a JSON body; (status, response body), status 0 when nothing answers."""
    req = urllib.request.Request(
        url, data=body, method="POST", headers={"Content-Type": "application/json"}
    )
    try:
        with _NO_PROXY.open(req, timeout=timeout) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()
    except (OSError, urllib.error.URLError) as exc:
        return 0, str(exc).encode()


def port_in_use(port: int) -> bool:
    """True when something accepts TCP connections on 127.0.0.1:`port`."""
    with socket.socket() as s:
        s.settimeout(1.0)
        return s.connect_ex(("127.0.0.1", port)) == 0


def server_metadata(url: str) -> dict[str, Any]:
    """The server's `GET /v2` answer (name, version, extensions), {} when unavailable."""
    status, body = http_get(f"http://{url}/v2")
    if status != 200:
        return {}
    try:
        data = json.loads(body)
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}


def wait_models_ready(url: str, models: list[str], timeout: float = READY_TIMEOUT_S) -> None:
    """Poll server and per-model readiness until all answer 200."""
    deadline = time.monotonic() + timeout
    pending = ["/v2/health/ready", *(f"/v2/models/{m}/ready" for m in models)]
    while pending:
        status, _ = http_get(f"http://{url}{pending[0]}")
        if status == 200:
            pending.pop(0)
            continue
        if time.monotonic() > deadline:
            raise BenchSetupError(
                f"{url}{pending[0]} not ready after {timeout:.0f}s (HTTP {status})"
            )
        time.sleep(0.2)


def group_pids(pgid: int) -> list[int]:
    """Live (non-zombie) pids whose process group is `pgid`, and their descendants (tritium's
    instance workers run in sessions of their own), read from /proc."""
    children: dict[int, list[int]] = {}
    members = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            pid, ppid = int(stat.parent.name), int(fields[1])
        except (OSError, IndexError, ValueError):
            continue
        if fields[0] == "Z":
            continue
        children.setdefault(ppid, []).append(pid)
        if fields[2] == str(pgid):
            members.append(pid)
    found, todo = set(members), members
    while todo:
        for child in children.get(todo.pop(), ()):
            if child not in found:
                found.add(child)
                todo.append(child)
    return sorted(found)


SHM_DIR = Path("/dev/shm")
_PYTHON_BACKEND_REGION = "triton_python_backend_shm_region_"


def shm_names(pgid: int) -> set[str]:
    """Names in /dev/shm that processes of group `pgid` have mapped or were told to use."""
    names: set[str] = set()
    prefix = str(SHM_DIR) + "/"
    for pid in group_pids(pgid):
        proc = Path("/proc") / str(pid)
        try:
            maps = (proc / "maps").read_text()
            args = (proc / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        for line in maps.splitlines():
            path = line.split(maxsplit=5)[-1]
            if path.startswith(prefix):
                names.add(path[len(prefix) :].removesuffix(" (deleted)"))
        # Triton names its Python backend stub's region on the stub's command line.
        names.update(a.decode() for a in args if a.startswith(_PYTHON_BACKEND_REGION.encode()))
    return names


class TritonServer:
    """Real tritonserver, started and stopped by the shared tools' scripts."""

    name = "triton"

    def __init__(
        self,
        anchors: Anchors,
        repository: Path,
        ports: tuple[int, int, int],
        run_dir: Path,
    ) -> None:
        self.anchors = anchors
        self.repository = repository
        self.http_port, self.grpc_port, self.metrics_port = ports
        self.pid_file = run_dir / f"triton-{self.http_port}.pid"
        self.log_file = run_dir / "triton.log"

    @property
    def url(self) -> str:
        return f"127.0.0.1:{self.http_port}"

    @property
    def grpc_url(self) -> str:
        return f"127.0.0.1:{self.grpc_port}"

    @property
    def pgid(self) -> int | None:
        # start-triton.sh runs the server under setsid: its pid is its process group.
        try:
            return int(self.pid_file.read_text().strip())
        except (OSError, ValueError):
            return None

    def start(self) -> None:
        env = {
            **os.environ,
            "PID_FILE": str(self.pid_file),
            "LOG_FILE": str(self.log_file),
            "READY_TIMEOUT": str(int(READY_TIMEOUT_S)),
        }
        cmd = [
            "bash",
            str(self.anchors.start_triton),
            str(self.anchors.prefix),
            str(self.repository),
            str(self.http_port),
            str(self.grpc_port),
            str(self.metrics_port),
            *COMMON_FLAGS,
        ]
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
        if proc.returncode != 0:
            raise BenchSetupError(f"real Triton did not start:\n{proc.stderr.strip()}")

    def stop(self) -> None:
        if not self.pid_file.exists():
            return
        proc = subprocess.run(
            ["bash", str(self.anchors.stop_server), str(self.pid_file)],
            capture_output=True,
            text=True,
        )
        if proc.returncode != 0:
            print(f"[bench] stopping Triton failed: {proc.stderr.strip()}")


class TritiumServer:
    """`python -m tritium serve` in a child process (its own session), via ServerProcess."""

    name = "tritium"

    def __init__(
        self, repository: Path, http_port: int, run_dir: Path, extra_args: tuple[str, ...] = ()
    ) -> None:
        self.http_port = http_port
        self.grpc_port = http_port + 1
        self.log_file = run_dir / "tritium.log"
        self._process = ServerProcess(
            [repository],
            [
                *COMMON_FLAGS,
                f"--http-port={http_port}",
                f"--grpc-port={self.grpc_port}",
                *extra_args,
            ],
            startup_timeout=READY_TIMEOUT_S,
            grpc=True,
        )

    @property
    def url(self) -> str:
        return f"127.0.0.1:{self.http_port}"

    @property
    def grpc_url(self) -> str:
        return f"127.0.0.1:{self.grpc_port}"

    @property
    def pgid(self) -> int | None:
        proc = self._process.proc
        return proc.pid if proc is not None and proc.poll() is None else None

    def start(self) -> None:
        if port_in_use(self.http_port):
            raise BenchSetupError(f"port {self.http_port} is already in use; pick another")
        try:
            self._process.start()
        except RuntimeError as exc:
            raise BenchSetupError(f"tritium did not start: {exc}") from exc

    def stop(self) -> None:
        proc = self._process.proc
        if proc is None:
            return
        try:
            self._process.stop(timeout=30)
        finally:
            # Workers that outlived the server (same session) must not linger.
            leftovers = group_pids(proc.pid)
            for pid in leftovers:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            if leftovers:
                print(f"[bench] tritium left processes {leftovers} after shutdown; killed them")
            self.log_file.write_text(self._process.log + "\n")
