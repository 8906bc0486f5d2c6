"""Would binding ORT's outputs straight into the output buffer (IOBinding) save time over
``session.run`` followed by one copy into it? CPU time per run, in one process, on the
bench MLP (INPUT0/OUTPUT0 FP32 [256], one ORT thread), alternating the variants in rounds.

- ``run_copy``: what the onnxruntime backend does (``session.run``, then the output is
  copied into its buffer);
- ``bind_each``: a binding made per run, the output bound to the buffer (what writing into
  the output arena would need: the arena slot differs per batch);
- ``bind_once``: one binding, the output bound once (a fixed buffer, not the arena).

    .venv/bin/python bench/onnx_iobinding.py MODEL.onnx   # gen_onnx.py --model mlp MODEL.onnx
"""

from __future__ import annotations

import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np


def main(path: str, rounds: int = 5) -> None:
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    session = ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])

    for batch in (1, 16, 64):
        x = np.random.default_rng(0).random((batch, 256), np.float32)
        out = np.empty((batch, 256), np.float32)
        once = session.io_binding()
        once.bind_output("OUTPUT0", "cpu", 0, np.float32, out.shape, out.ctypes.data)

        def run_copy(x: Any = x, out: Any = out) -> None:
            out[:] = session.run(["OUTPUT0"], {"INPUT0": x})[0]

        def bind_each(x: Any = x, out: Any = out) -> None:
            binding = session.io_binding()
            binding.bind_cpu_input("INPUT0", x)
            binding.bind_output("OUTPUT0", "cpu", 0, np.float32, out.shape, out.ctypes.data)
            session.run_with_iobinding(binding)

        def bind_once(x: Any = x, once: Any = once) -> None:
            once.bind_cpu_input("INPUT0", x)
            session.run_with_iobinding(once)

        variants: dict[str, Callable[[], None]] = {
            "run_copy": run_copy,
            "bind_each": bind_each,
            "bind_once": bind_once,
        }
        times: dict[str, list[float]] = {name: [] for name in variants}
        n = 2000 if batch < 64 else 700
        for _ in range(rounds):
            for name, call in variants.items():
                start = time.process_time()
                for _ in range(n):
                    call()
                times[name].append((time.process_time() - start) / n * 1e6)
        medians = {name: round(statistics.median(v), 1) for name, v in times.items()}
        print(f"batch {batch}: CPU µs per run (median of {rounds} rounds): {medians}")


if __name__ == "__main__":
    main(sys.argv[1])
