"""Size-proportional work of big requests, done on a thread instead of the event loop.

Every client shares the event loop, so decoding a 16 MB body or gzip-compressing a
32 MiB response on it stalls all of them. HTTP bodies and responses of ``OFFLOAD_BYTES``
or more are decoded, encoded and compressed on a small pool of threads instead, and so
are gRPC responses that big when they are compressed; zlib and
numpy release the GIL while they work, and Python-level loops give it back to the loop
every switch interval (5 ms), so other clients keep being served. Smaller requests take
the usual path: the only cost they pay is one size comparison.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

T = TypeVar("T")

#: Bodies and responses at least this big are handled off the event loop.
OFFLOAD_BYTES = 512 * 1024
#: Threads doing such work; more big requests wait their turn (their memory is already
#: bounded by --http-max-input-size and the connection's pipeline limit).
OFFLOAD_THREADS = 2

_executor: ThreadPoolExecutor | None = None


def _pool() -> ThreadPoolExecutor:
    global _executor
    if _executor is None:
        _executor = ThreadPoolExecutor(OFFLOAD_THREADS, thread_name_prefix="tritium-offload")
    return _executor


async def off_loop(fn: Callable[..., T], *args: object) -> T:
    """``fn(*args)`` on an offload thread."""
    return await asyncio.get_running_loop().run_in_executor(_pool(), fn, *args)
