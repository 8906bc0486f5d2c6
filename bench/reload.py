"""Model life cycle side by side: reload under load, and how fast a load reaches READY.

For each server (tritium, real Triton 2.51), on a fresh repository in explicit control mode:

- reload under load: 4 clients infer back to back while the model is reloaded with new code
  ``--reloads`` times (instance count 1, 2, 2, 1, ... so it changes every other time);
  reports answers, failures, whether every new version answered, the longest pause between
  two answers, and the reload times;
- load time: ``--loads`` times, unload a one-instance model, then time ``load_model`` until
  it returns (the model is READY then on both servers); reports the median and the unload
  time.

    .venv/bin/python bench/reload.py                       # both servers
    .venv/bin/python bench/reload.py --servers tritium     # one of them

Triton is started with the shared tools' ``start-triton.sh`` (see bench/README.md).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

import tritonclient.http as httpclient  # noqa: E402

from bench.anchors import default_prefix, default_tools_dir, locate_anchors  # noqa: E402
from tritium.testing import ServerProcess  # noqa: E402
from tritium.testing.lifecycle import reload_under_load, write_marked_model  # noqa: E402

EXPLICIT = ("--model-control-mode=explicit", "--load-model=live", "--allow-metrics=false")


def instances_for(reload: int) -> int:
    return 1 + ((reload + 1) // 2) % 2


@contextmanager
def tritium(repo: Path) -> Iterator[str]:
    with ServerProcess([repo], EXPLICIT) as server:
        yield server.http_url


@contextmanager
def triton(repo: Path, ports: tuple[int, int, int]) -> Iterator[str]:
    anchors = locate_anchors(default_tools_dir(), default_prefix())
    run_dir = Path(tempfile.mkdtemp(prefix="bench-reload-"))
    env = {**os.environ, "PID_FILE": str(run_dir / "triton.pid"), "LOG_FILE": str(run_dir / "log")}
    start = [
        "bash",
        str(anchors.start_triton),
        str(anchors.prefix),
        str(repo),
        *(str(p) for p in ports),
        *EXPLICIT,
    ]
    subprocess.run(start, env=env, check=True, capture_output=True, text=True)
    try:
        yield f"127.0.0.1:{ports[0]}"
    finally:
        subprocess.run(["bash", str(anchors.stop_server), env["PID_FILE"]], capture_output=True)


def measure(name: str, server: Callable[[Path], object], reloads: int, loads: int) -> None:
    repo = Path(tempfile.mkdtemp(prefix=f"bench-reload-{name}-"))
    write_marked_model(repo, "live", 0)
    write_marked_model(repo, "single", 1)
    with server(repo) as url:  # type: ignore[attr-defined]
        control = httpclient.InferenceServerClient(url, network_timeout=600.0)

        def reload(i: int) -> None:
            write_marked_model(repo, "live", i, instances=instances_for(i))
            time.sleep(0.01)  # a new modification time, whatever the file system's clock
            control.load_model("live")

        report = reload_under_load(url, "live", reload, reloads=reloads, clients=4)
        missing = sorted(set(range(1, reloads + 1)) - report.marks)
        print(f"[{name}] reload under load: {report.summary()}; missing marks {missing}")

        load_s, unload_s = [], []
        for _ in range(loads):
            start = time.monotonic()
            control.load_model("single")
            load_s.append(time.monotonic() - start)
            assert control.is_model_ready("single")
            start = time.monotonic()
            control.unload_model("single")
            unload_s.append(time.monotonic() - start)
        print(
            f"[{name}] load to READY: median {statistics.median(load_s) * 1000:.0f} ms "
            f"(min {min(load_s) * 1000:.0f}); unload: median "
            f"{statistics.median(unload_s) * 1000:.0f} ms"
        )
        control.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--servers", nargs="+", default=["tritium", "triton"])
    parser.add_argument("--reloads", type=int, default=20)
    parser.add_argument("--loads", type=int, default=10)
    parser.add_argument("--triton-ports", default="18000,18001,18002")
    args = parser.parse_args(argv)
    ports = tuple(int(p) for p in args.triton_ports.split(","))
    servers = {"tritium": tritium, "triton": lambda repo: triton(repo, ports)}  # type: ignore[arg-type]
    for name in args.servers:
        measure(name, servers[name], args.reloads, args.loads)
    return 0


if __name__ == "__main__":
    from tritium.testing import exit_on_signals

    with exit_on_signals():  # SIGTERM/SIGHUP unwind like Ctrl-C: its servers are stopped
        code = main()
    sys.exit(code)
