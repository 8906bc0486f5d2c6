"""GPU discovery without any GPU library: what the NVIDIA driver exposes in /proc and /dev.

Used to fill ``KIND_AUTO``/``KIND_GPU`` instance groups the way Triton does and to refuse
``KIND_GPU`` on a machine without GPUs. ``CUDA_VISIBLE_DEVICES`` narrows the count as it
would for CUDA.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

_DEV_NODE = re.compile(r"^nvidia(\d+)$")


def gpu_count(proc: Path = Path("/proc/driver/nvidia/gpus"), dev: Path = Path("/dev")) -> int:
    try:
        found = len([p for p in proc.iterdir() if p.is_dir()])
    except OSError:
        found = 0
    if not found:
        try:
            found = len([p for p in os.listdir(dev) if _DEV_NODE.match(p)])
        except OSError:
            found = 0
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        ids = [v for v in visible.split(",") if v.strip() and not v.strip().startswith("-")]
        found = min(found, len(ids))
    return found
