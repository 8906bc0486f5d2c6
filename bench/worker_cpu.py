"""CPU per request inside a model worker, in process, without the server or sockets.

Runs the worker's side of one add_sub execution over and over — decode the exec message
the server sends, build the pb_utils requests over the arena, call the example model's
``execute``, collect and place its outputs, encode the reply — and prints the Python
cost per request. Like ``path_cpu.py`` for the main process, it is deterministic enough to
compare changes on a noisy machine:

    .venv/bin/python bench/worker_cpu.py [--requests N] [--profile]
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import sys
import time
from pathlib import Path

# Run as a script, bench/ itself is on sys.path; shared pieces are imported as `bench.*`.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np

from bench.add_sub import CONFIG, LOAD_SPEC  # noqa: E402
from tritium.backends.python.model_host import ModelHost
from tritium.ipc.arena import Arena
from tritium.ipc.framing import FrameDecoder, encode
from tritium.ipc.messages import Exec, Init, Load, RequestItem, decode_to_worker


def _host() -> ModelHost:
    host = ModelHost(Load(**LOAD_SPEC))
    host.load()
    host.initialize(Init(CONFIG, "add_sub_0"))
    return host


def _exec_message(in_arena: Arena) -> bytes:
    """The exec message for one request whose two inputs already sit in the arena."""
    data = np.arange(4, dtype=np.float32).tobytes()
    in_arena.buf[64:80] = data
    in_arena.buf[128:144] = data
    item = RequestItem(
        "", 0, 0, {}, None, [("INPUT0", "FP32", [4], 16), ("INPUT1", "FP32", [4], 16)]
    )
    return encode(Exec([item]))


def _run(requests: int, profile: bool) -> None:
    host = _host()
    in_arena, out_arena = Arena.create(1 << 20), Arena.create(1 << 20)
    frame = _exec_message(in_arena)
    decoder = FrameDecoder(decode_to_worker)

    def once() -> bytes:
        (message,) = decoder.feed(frame)
        reply = host.execute(message.requests, in_arena, out_arena)
        return encode(reply)

    for _ in range(2000):
        once()
    profiler = cProfile.Profile() if profile else None
    if profiler is not None:
        profiler.enable()
    start = time.process_time()
    for _ in range(requests):
        once()
    spent = time.process_time() - start
    if profiler is not None:
        profiler.disable()
        pstats.Stats(profiler).sort_stats("tottime").print_stats(25)
    print(f"{spent / requests * 1e6:.1f} µs CPU per request ({requests} requests)")
    in_arena.close()
    out_arena.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=50000)
    parser.add_argument("--profile", action="store_true", help="print a cProfile summary")
    args = parser.parse_args()
    _run(args.requests, args.profile)


if __name__ == "__main__":
    main()
