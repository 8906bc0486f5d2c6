"""Server memory per reload and per replaced worker, on a real server process.

Starts ``tritium serve`` on the example repository (explicit control, ``identity`` loaded),
then runs ``--cycles`` of one fault at a time — an unload + load through the repository API,
or a ``kill -9`` of the model's worker and the wait until it is replaced — answering one
inference after each. The server process's resident memory (``VmRSS``, not its workers')
is sampled after every cycle; the slope of a least-squares line over the samples after
warm-up is the growth per cycle.

    .venv/bin/python bench/release_growth.py                   # both faults, 200 cycles each
    .venv/bin/python bench/release_growth.py --faults kill --cycles 100
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import sys
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

import numpy as np  # noqa: E402
import tritonclient.http as httpclient  # noqa: E402

from tritium.testing import ServerProcess  # noqa: E402
from tritium.testing.processes import child_pids  # noqa: E402

MODEL = "identity"
EXAMPLES = REPO_ROOT / "examples" / "model_repository"
WARM_UP = 20


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError(f"no VmRSS for pid {pid}")


def infer_once(client: httpclient.InferenceServerClient) -> None:
    data = np.arange(4, dtype=np.float32).reshape(1, 4)
    inp = httpclient.InferInput("INPUT0", list(data.shape), "FP32")
    inp.set_data_from_numpy(data)
    result = client.infer(MODEL, [inp])
    assert np.array_equal(result.as_numpy("OUTPUT0"), data)


def wait_replaced(client: httpclient.InferenceServerClient, server: int, old: int) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        now = child_pids(server)
        if now and old not in now and client.is_model_ready(MODEL):
            return
        time.sleep(0.02)
    raise RuntimeError("the killed worker was not replaced within 60 s")


def cycle(fault: str, client: httpclient.InferenceServerClient, server: int) -> None:
    if fault == "reload":
        client.unload_model(MODEL)
        client.load_model(MODEL)
    else:
        (worker,) = child_pids(server)
        os.kill(worker, signal.SIGKILL)
        wait_replaced(client, server, worker)
    infer_once(client)


def slope(samples: list[int]) -> float:
    xs = list(range(len(samples)))
    return statistics.linear_regression(xs, samples).slope


def run(fault: str, cycles: int) -> tuple[float, int, int]:
    args = (
        "--model-control-mode=explicit",
        f"--load-model={MODEL}",
        # Restart at once every time: the cycles measure memory, not the back-off.
        "--backend-config=python,restart-backoff-max-seconds=0.01",
    )
    with ServerProcess([EXAMPLES], args) as server:
        assert server.proc is not None
        pid = server.proc.pid
        client = httpclient.InferenceServerClient(server.http_url.removeprefix("http://"))
        try:
            infer_once(client)
            samples = []
            for i in range(WARM_UP + cycles):
                cycle(fault, client, pid)
                if i >= WARM_UP:
                    time.sleep(0.6)  # past the release collection's delay
                    samples.append(rss_kib(pid))
        finally:
            client.close()
    return slope(samples), samples[0], samples[-1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--faults", nargs="+", default=["reload", "kill"])
    parser.add_argument("--cycles", type=int, default=200)
    options = parser.parse_args()
    print("| fault | cycles | RSS after warm-up KiB | RSS at end KiB | fitted KiB/cycle |")
    print("|---|---:|---:|---:|---:|", flush=True)
    for fault in options.faults:
        per_cycle, first, last = run(fault, options.cycles)
        print(f"| {fault} | {options.cycles} | {first} | {last} | {per_cycle:.2f} |", flush=True)


if __name__ == "__main__":
    main()
