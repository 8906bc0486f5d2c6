"""`podman kube play` of the Deployment the chart renders, with the image `make image`
built: the pod must start as the chart describes it (UID 1000, read-only root, /dev/shm and
/tmp volumes, the chart's arguments) and its server must answer ready.

The chart's model volume is a PersistentVolumeClaim, which podman cannot bind to anything
here: it is replaced by a hostPath to the bundled examples. Everything else is played as
rendered.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from deploycheck import chart
from deploycheck.outcome import EXAMPLES, ROOT, Skip

IMAGE = os.environ.get("IMAGE", "localhost/tritium:latest")
CONTAINERS_CONF = ROOT / "deploy" / "container" / "containers.conf"


def podman(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    env.setdefault("CONTAINERS_CONF", str(CONTAINERS_CONF))
    return subprocess.run(
        ["podman", *args], capture_output=True, text=True, timeout=timeout, env=env
    )


def playable_deployment() -> dict[str, Any]:
    repository, _, tag = IMAGE.rpartition(":")
    docs = chart.render(
        {"image": {"repository": repository, "tag": tag, "pullPolicy": "Never"}, "replicaCount": 1}
    )
    deployment = next(d for d in docs if d["kind"] == "Deployment")
    pod = deployment["spec"]["template"]["spec"]
    for volume in pod["volumes"]:
        if volume["name"] == "models":
            volume.pop("persistentVolumeClaim")
            volume["hostPath"] = {"path": str(EXAMPLES), "type": "Directory"}
    # The chart's ServiceAccount does not exist for podman.
    pod.pop("serviceAccountName", None)
    return deployment


def kube_play(log: Any = print) -> list[str]:
    if shutil.which("podman") is None:
        raise Skip("podman not installed")
    if podman("image", "exists", IMAGE).returncode != 0:
        raise Skip(f"image {IMAGE} not built here (make image)")
    chart.need("yaml")
    import yaml

    deployment = playable_deployment()
    problems: list[str] = []
    with tempfile.TemporaryDirectory() as tmp:
        manifest = Path(tmp) / "deployment.yaml"
        manifest.write_text(yaml.safe_dump(deployment))
        podman("kube", "down", str(manifest))
        played = podman("kube", "play", str(manifest), timeout=300)
        if played.returncode != 0:
            return [f"podman kube play failed: {played.stderr.strip()[-1500:]}"]
        try:
            container = f"{deployment['metadata']['name']}-pod-tritium"
            names = podman("ps", "--format", "{{.Names}}").stdout.split()
            container = next((n for n in names if n.endswith("-tritium")), container)
            ready = False
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline and not ready:
                probe = podman(
                    "exec",
                    container,
                    "python3",
                    "-c",
                    "import urllib.request as u; "
                    "print(u.urlopen('http://127.0.0.1:8000/v2/health/ready').status)",
                )
                ready = probe.stdout.strip() == "200"
                if not ready:
                    time.sleep(2)
            if not ready:
                problems.append("the played pod never answered /v2/health/ready")
            who = podman("exec", container, "id", "-u").stdout.strip()
            if who != "1000":
                problems.append(f"the server runs as UID {who!r}, not 1000")
            touch = podman("exec", container, "touch", "/opt/tritium/x")
            if touch.returncode == 0:
                problems.append("the root file system is writable")
            log(
                f"  pod {container}: ready={ready}, uid={who}, read-only root={touch.returncode != 0}"
            )
        finally:
            podman("kube", "down", str(manifest), timeout=180)
    return problems
