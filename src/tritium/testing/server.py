"""Run a real ``tritium serve`` process for tests and benchmarks.

The server is started on port 0 and the bound port is read from its
``Started HTTPService at <addr>:<port>`` line, so tests never race for a free port.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path

_STARTED = re.compile(r"Started HTTPService at [^:\s]+:(\d+)")
_GRPC_STARTED = re.compile(r"Started GRPCInferenceService at [^:\s]+:(\d+)")
_METRICS_STARTED = re.compile(r"Started Metrics Service at [^:\s]+:(\d+)")
_OPENAI_STARTED = re.compile(r"Started OpenAIService at [^:\s]+:(\d+)")


class ServerProcess:
    """``with ServerProcess([repo]) as s: s.http_url`` — a server in a child process."""

    def __init__(
        self,
        repositories: Sequence[str | Path],
        extra_args: Sequence[str] = (),
        *,
        startup_timeout: float = 120.0,
        env: dict[str, str] | None = None,
        grpc: bool = False,
        metrics: bool = False,
        openai: bool = False,
    ) -> None:
        self.args = [
            sys.executable,
            "-m",
            "tritium",
            "serve",
            *(f"--model-repository={r}" for r in repositories),
            "--http-port=0",
            *(("--grpc-port=0",) if grpc else ("--allow-grpc=false",)),
            *(("--metrics-port=0",) if metrics else ("--allow-metrics=false",)),
            *(("--openai-port=0",) if openai else ()),
            *extra_args,
        ]
        self.startup_timeout = startup_timeout
        self.env = env
        self.proc: subprocess.Popen[str] | None = None
        self.port: int | None = None
        self.grpc_port: int | None = None
        self.metrics_port: int | None = None
        self.openai_port: int | None = None
        self._metrics = metrics
        self._openai = openai
        self.lines: list[str] = []
        self._lock = threading.Lock()
        self._started = threading.Event()
        self._reader: threading.Thread | None = None

    @property
    def http_url(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def grpc_url(self) -> str:
        return f"127.0.0.1:{self.grpc_port}"

    @property
    def metrics_url(self) -> str:
        return f"http://127.0.0.1:{self.metrics_port}/metrics"

    @property
    def openai_url(self) -> str:
        """The OpenAI endpoint's base URL, as the ``openai`` client takes it."""
        return f"http://127.0.0.1:{self.openai_port}/v1"

    @property
    def log(self) -> str:
        with self._lock:
            return "\n".join(self.lines)

    def start(self) -> ServerProcess:
        env = dict(os.environ if self.env is None else self.env)
        env.setdefault("PYTHONUNBUFFERED", "1")
        self.proc = subprocess.Popen(
            self.args,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env=env,
            start_new_session=True,
        )
        try:
            self._reader = threading.Thread(target=self._read, daemon=True)
            self._reader.start()
            started = self._started.wait(self.startup_timeout) and self.port is not None
        except BaseException:  # interrupted while it starts: it must not outlive us
            self.stop(10)
            raise
        if not started:
            code = self.proc.poll()
            self.stop()
            raise RuntimeError(f"server did not start (exit code {code}); log:\n{self.log[-5000:]}")
        return self

    def _read(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        for line in self.proc.stdout:
            line = line.rstrip("\n")
            with self._lock:
                self.lines.append(line)
            g = _GRPC_STARTED.search(line)
            if g and self.grpc_port is None:
                self.grpc_port = int(g.group(1))
            g = _METRICS_STARTED.search(line)
            if g and self.metrics_port is None:
                self.metrics_port = int(g.group(1))
            g = _OPENAI_STARTED.search(line)
            if g and self.openai_port is None:
                self.openai_port = int(g.group(1))
            m = _STARTED.search(line)
            if m and self.port is None:
                self.port = int(m.group(1))
            # Started when HTTP is up, and metrics and OpenAI too where asked for (logged
            # after HTTP).
            if (
                self.port is not None
                and (not self._metrics or self.metrics_port is not None)
                and (not self._openai or self.openai_port is not None)
            ):
                self._started.set()
        self._started.set()

    def wait_for_log(self, pattern: str, timeout: float = 10.0) -> bool:
        regex = re.compile(pattern)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if regex.search(self.log):
                return True
            time.sleep(0.02)
        return False

    def signal(self, sig: int = signal.SIGTERM) -> None:
        assert self.proc is not None
        self.proc.send_signal(sig)

    def wait(self, timeout: float = 60.0) -> int:
        assert self.proc is not None
        code = self.proc.wait(timeout)
        if self._reader is not None:
            self._reader.join(5)
        return code

    def stop(self, timeout: float = 60.0) -> int | None:
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                return self.wait(timeout)
            except subprocess.TimeoutExpired:
                self._kill_group()
                return self.wait(10)
            except BaseException:  # interrupted while it stops: it must not outlive us
                self._kill_group()
                raise
        return self.wait(10)

    def _kill_group(self) -> None:
        assert self.proc is not None
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(10)

    def __enter__(self) -> ServerProcess:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
