"""`make image-test`: build tritium's image, run it the way a cluster does, and measure it.

The container runs with a read-only root file system, as UID 1000, with the bundled
examples mounted read-only and KServe's Triton arguments (`tritonserver
--model-store=... --grpc-port=9000 --http-port=8080 --allow-grpc=true --allow-http=true`).
It must answer one inference over HTTP and one over gRPC (tritonclient, from this venv),
serve /metrics, and, stopped (SIGTERM) while a streamed request is in flight, finish that
request and exit 0. Image size, start-to-ready time and idle memory are printed and written
to build/image/image-test.json. Skipped, with the reason, where podman cannot run.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
HERE = ROOT / "deploy" / "container"
IMAGE = os.environ.get("IMAGE", "localhost/tritium:latest")
NAME = f"tritium-image-test-{os.getpid()}"
KSERVE_ARGS = ["--grpc-port=9000", "--http-port=8080", "--allow-grpc=true", "--allow-http=true"]


def say(text: str) -> None:
    print(f"image-test: {text}", flush=True)


def podman(*args: str, check: bool = True, timeout: float = 120) -> str:
    env = dict(os.environ)
    env.setdefault("CONTAINERS_CONF", str(HERE / "containers.conf"))
    done = subprocess.run(
        ["podman", *args], capture_output=True, text=True, timeout=timeout, env=env
    )
    if check and done.returncode != 0:
        raise RuntimeError(f"podman {' '.join(args)}: {done.stderr.strip()}")
    return done.stdout.strip()


def host_port(container_port: int) -> int:
    return int(podman("port", NAME, f"{container_port}/tcp").rsplit(":", 1)[1])


def get(url: str, timeout: float = 2) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as reply:
            return reply.status, reply.read()
    except urllib.error.HTTPError as exc:
        return exc.code, b""


def wait_ready(url: str, started: float, limit: float = 120) -> float:
    while time.monotonic() - started < limit:
        try:
            if get(url + "/v2/health/ready", timeout=1)[0] == 200:
                return time.monotonic() - started
        except OSError:
            pass
        time.sleep(0.05)
    raise RuntimeError("the container never became ready:\n" + podman("logs", NAME, check=False))


def idle_memory_mb() -> float:
    # cgroup memory usage of the whole container (tritium and its model instance processes).
    usage = podman("stats", "--no-stream", "--format", "{{.MemUsage}}", NAME).split("/")[0]
    number = float("".join(c for c in usage if c.isdigit() or c == "."))
    scale = {"kB": 1e-3, "MB": 1, "GB": 1e3, "KiB": 1.024e-3, "MiB": 1.048576, "GiB": 1073.741824}
    unit = usage.strip().lstrip("0123456789.").strip()
    return round(number * scale.get(unit, 1), 1)


def infer_http(url: str) -> None:
    import numpy as np
    import tritonclient.http as httpclient

    client = httpclient.InferenceServerClient(url)
    a = np.arange(4, dtype=np.float32)
    inputs = [
        httpclient.InferInput("INPUT0", [4], "FP32"),
        httpclient.InferInput("INPUT1", [4], "FP32"),
    ]
    inputs[0].set_data_from_numpy(a)
    inputs[1].set_data_from_numpy(a)
    result = client.infer("add_sub", inputs)
    assert (result.as_numpy("OUTPUT0") == a + a).all()
    client.close()


def infer_grpc(url: str) -> None:
    import numpy as np
    import tritonclient.grpc as grpcclient

    client = grpcclient.InferenceServerClient(url)
    a = np.arange(4, dtype=np.float32)
    inputs = [
        grpcclient.InferInput("INPUT0", [4], "FP32"),
        grpcclient.InferInput("INPUT1", [4], "FP32"),
    ]
    inputs[0].set_data_from_numpy(a)
    inputs[1].set_data_from_numpy(a + 1)
    result = client.infer("add_sub", inputs)
    assert (result.as_numpy("OUTPUT1") == -1).all()
    client.close()


def stream_words(url: str, words: int, delay_ms: int, out: dict[str, object]) -> None:
    """One generate_stream request; records how many word events arrived and how it ended."""
    body = json.dumps({"text_input": "drain", "max_tokens": words, "delay_ms": delay_ms}).encode()
    request = urllib.request.Request(
        url + "/v2/models/word_stream/generate_stream",
        data=body,
        method="POST",
        headers={"Content-Type": "application/json"},
    )
    events = 0
    try:
        with urllib.request.urlopen(request, timeout=60) as reply:
            for line in reply:
                if line.startswith(b"data:") and b"text_output" in line:
                    events += 1
        out["status"] = "completed"
    except Exception as exc:  # recorded: the check below reports it
        out["status"] = f"failed: {exc!r}"
    out["events"] = events


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--no-build", action="store_true", help="test the image as it is")
    args = parser.parse_args()
    if not args.no_build:
        built = subprocess.run([str(HERE / "build-image.sh")], env=dict(os.environ))
        if built.returncode == 2:
            say("SKIPPED: the image cannot be built on this machine (see above)")
            return 0
        if built.returncode != 0:
            return built.returncode
    if shutil.which("podman") is None:
        say("SKIPPED: podman is not installed")
        return 0
    results: dict[str, object] = {"image": IMAGE}
    results["image_size_mb"] = round(
        int(podman("image", "inspect", "--format", "{{.Size}}", IMAGE)) / 1e6, 1
    )
    podman("rm", "-f", NAME, check=False)
    started = time.monotonic()
    podman(
        "run",
        "-d",
        "--name",
        NAME,
        "--read-only",
        "--tmpfs",
        "/tmp",
        "--user",
        "1000:1000",
        "--shm-size=256m",
        "-v",
        f"{ROOT / 'examples' / 'model_repository'}:/mnt/models:ro",
        "-p",
        "127.0.0.1::8080",
        "-p",
        "127.0.0.1::9000",
        "-p",
        "127.0.0.1::8002",
        IMAGE,
        "tritonserver",
        "--model-store=/mnt/models",
        *KSERVE_ARGS,
    )
    problems: list[str] = []
    try:
        http = f"http://127.0.0.1:{host_port(8080)}"
        results["start_to_ready_s"] = round(wait_ready(http, started), 2)
        say(
            f"ready {results['start_to_ready_s']} s after podman run (read-only root, UID 1000, KServe's arguments)"
        )
        time.sleep(3)
        results["idle_memory_mb"] = idle_memory_mb()
        results["processes"] = len(podman("top", NAME, "pid").splitlines()) - 1
        infer_http(http.removeprefix("http://"))
        say("HTTP inference on add_sub: ok")
        infer_grpc(f"127.0.0.1:{host_port(9000)}")
        say("gRPC inference on add_sub: ok")
        status, metrics = get(f"http://127.0.0.1:{host_port(8002)}/metrics")
        if (
            status != 200
            or b'nv_inference_request_success{model="add_sub",version="1"} 2' not in metrics
        ):
            problems.append("/metrics does not count the two inferences")
        else:
            say("/metrics counts both inferences")
        stream: dict[str, object] = {}
        words, delay_ms = 8, 250
        client = threading.Thread(target=stream_words, args=(http, words, delay_ms, stream))
        client.start()
        time.sleep(0.6)
        stop_at = time.monotonic()
        podman("stop", "-t", "30", NAME, timeout=60)
        results["stop_s"] = round(time.monotonic() - stop_at, 2)
        client.join(timeout=60)
        exit_code = int(podman("inspect", "--format", "{{.State.ExitCode}}", NAME))
        results["exit_code"] = exit_code
        results["in_flight_request"] = stream
        say(
            f"stopped with a {words * delay_ms / 1000:.1f} s stream in flight: {stream}, exit code {exit_code}, {results['stop_s']} s"
        )
        if stream.get("status") != "completed" or stream.get("events") != words:
            problems.append(f"the in-flight request did not complete: {stream}")
        if exit_code != 0:
            problems.append(f"exit code {exit_code}")
    finally:
        log = podman("logs", NAME, check=False)
        podman("rm", "-f", NAME, check=False)
    out = ROOT / "build" / "image" / "image-test.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=2) + "\n")
    say(
        f"measured: size {results['image_size_mb']} MB, start-to-ready {results.get('start_to_ready_s')} s, "
        f"idle memory {results.get('idle_memory_mb')} MB ({results.get('processes')} processes); {out.relative_to(ROOT)}"
    )
    if problems:
        print(log[-3000:])
        for problem in problems:
            say(f"FAILED: {problem}")
        return 1
    say("passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
